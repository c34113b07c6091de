/*
 * test_frozen_pins.c - the live sbx/provider.h keeps every promise each
 * frozen copy made (1.0 and 1.1).
 *
 * Each pair of tables comes from frozen_pins.c, compiled against the frozen
 * copy and against the live header (see abi_pins.h). A difference means a
 * provider compiled from that frozen header would read or write something
 * else than the current host: restore the member, or append instead.
 */
#include "abi_pins.h"

#include <criterion/criterion.h>

#include <string.h>

typedef const struct abi_pin *(*pins_fn)(size_t *n);

/* The two tables of one frozen minor. */
struct pin_pair {
    const char *minor; /* "1.0", for messages */
    pins_fn live, frozen;
};

static const struct pin_pair pair_1_0 = {"1.0", abi_pins_live_1_0, abi_pins_frozen_1_0};
static const struct pin_pair pair_1_1 = {"1.1", abi_pins_live_1_1, abi_pins_frozen_1_1};

static void same_items(const struct pin_pair *p)
{
    size_t nl, nf;
    const struct abi_pin *live = p->live(&nl);
    const struct abi_pin *frozen = p->frozen(&nf);
    cr_assert_eq(nl, nf, "%s: live table has %zu entries, frozen %zu", p->minor, nl, nf);
    for (size_t i = 0; i < nl; i++)
        cr_assert_str_eq(live[i].what, frozen[i].what, "%s: entry %zu", p->minor, i);
}

/* Every entry of `older` (n of them) holds in `newer`: equal, grown, or a
 * type check true in both. `newer_name` and `older_name` say which copies
 * they came from. */
static void check_promises(const char *m, const char *newer_name,
                           const struct abi_pin *newer, const char *older_name,
                           const struct abi_pin *older, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct abi_pin *l = &newer[i], *f = &older[i];
        const char *what = f->what;
        cr_assert_str_eq(l->what, what, "%s: entry %zu", m, i);
        if (f->text) {
            cr_expect(l->text && !strcmp(l->text, f->text),
                      "%s: %s: %s \"%s\", %s \"%s\"", m, what, newer_name,
                      l->text ? l->text : "(null)", older_name, f->text);
            continue;
        }
        switch (f->rel) {
        case ABI_PIN_EQ:
            cr_expect_eq(l->value, f->value, "%s: %s: %s %llu, %s %llu", m, what,
                         newer_name, (unsigned long long)l->value, older_name,
                         (unsigned long long)f->value);
            break;
        case ABI_PIN_GE:
            cr_expect_geq(l->value, f->value,
                          "%s: %s: %s %llu is smaller than %s %llu (structs "
                          "and the minor may only grow)",
                          m, what, newer_name, (unsigned long long)l->value,
                          older_name, (unsigned long long)f->value);
            break;
        case ABI_PIN_ONE:
            /* The older side checks that frozen_pins.c matches the frozen
             * header; the newer side that the header still declares that
             * type. */
            cr_expect_eq(f->value, 1, "%s: %s header: %s does not hold", m, older_name,
                         what);
            cr_expect_eq(l->value, 1, "%s: %s header: %s no longer holds", m,
                         newer_name, what);
            break;
        default:
            cr_expect_fail("%s: %s: unknown relation %d", m, what, f->rel);
        }
    }
}

static void keeps_every_promise(const struct pin_pair *p)
{
    size_t nl, nf;
    const struct abi_pin *live = p->live(&nl);
    const struct abi_pin *frozen = p->frozen(&nf);
    cr_assert_eq(nl, nf);
    check_promises(p->minor, "live", live, "frozen", frozen, nf);
}

/* The frozen copy is the header of that minor: catch a copy taken from
 * elsewhere (or a pair wired to the wrong copy). */
static void frozen_copy_is(const struct pin_pair *p, uint64_t minor)
{
    size_t n;
    const struct abi_pin *frozen = p->frozen(&n);
    cr_assert_gt(n, 1);
    cr_assert_str_eq(frozen[0].what, "SBX_ABI_MAJOR");
    cr_assert_eq(frozen[0].value, 1);
    cr_assert_str_eq(frozen[1].what, "SBX_ABI_MINOR");
    cr_assert_eq(frozen[1].value, minor, "the frozen %s copy says minor %llu", p->minor,
                 (unsigned long long)frozen[1].value);
}

Test(frozen_pins, tables_list_the_same_items)
{
    same_items(&pair_1_0);
}

Test(frozen_pins, live_header_keeps_every_1_0_promise)
{
    keeps_every_promise(&pair_1_0);
}

Test(frozen_pins, frozen_copy_is_abi_1_0)
{
    frozen_copy_is(&pair_1_0, 0);
}

Test(frozen_pins, tables_1_1_list_the_same_items)
{
    same_items(&pair_1_1);
}

Test(frozen_pins, live_header_keeps_every_1_1_promise)
{
    keeps_every_promise(&pair_1_1);
}

Test(frozen_pins, frozen_copy_is_abi_1_1)
{
    frozen_copy_is(&pair_1_1, 1);
}

/* The 1.1 table is the 1.0 table with appends (one list, compiled with
 * ABI_PINS_MINOR=1), and the frozen 1.1 copy itself kept every 1.0
 * promise: the two freezes agree with each other. */
Test(frozen_pins, frozen_1_1_keeps_every_1_0_promise)
{
    size_t n0, n1;
    const struct abi_pin *t0 = abi_pins_frozen_1_0(&n0);
    const struct abi_pin *t1 = abi_pins_frozen_1_1(&n1);
    cr_assert_gt(n1, n0, "the 1.1 table adds nothing: %zu entries, 1.0 has %zu", n1, n0);
    check_promises("1.0 in 1.1", "frozen 1.1", t1, "frozen 1.0", t0, n0);
}
