/*
 * test_frozen_pins.c - the live sbx/provider.h keeps every promise the
 * frozen 1.0 copy made.
 *
 * Both tables come from frozen_pins.c, compiled against each header (see
 * abi_pins.h). A difference means a provider compiled from the 1.0 header
 * would read or write something else than the current host: restore the
 * 1.0 member, or append instead.
 */
#include "abi_pins.h"

#include <criterion/criterion.h>

#include <string.h>

Test(frozen_pins, tables_list_the_same_items)
{
    size_t nl, nf;
    const struct abi_pin *live = abi_pins_live(&nl);
    const struct abi_pin *frozen = abi_pins_frozen(&nf);
    cr_assert_eq(nl, nf, "live table has %zu entries, frozen %zu", nl, nf);
    for (size_t i = 0; i < nl; i++)
        cr_assert_str_eq(live[i].what, frozen[i].what, "entry %zu", i);
}

Test(frozen_pins, live_header_keeps_every_1_0_promise)
{
    size_t nl, nf;
    const struct abi_pin *live = abi_pins_live(&nl);
    const struct abi_pin *frozen = abi_pins_frozen(&nf);
    cr_assert_eq(nl, nf);
    for (size_t i = 0; i < nl; i++) {
        const struct abi_pin *l = &live[i], *f = &frozen[i];
        const char *what = f->what;
        if (f->text) {
            cr_expect(l->text && !strcmp(l->text, f->text),
                      "%s: live \"%s\", frozen \"%s\"", what,
                      l->text ? l->text : "(null)", f->text);
            continue;
        }
        switch (f->rel) {
        case ABI_PIN_EQ:
            cr_expect_eq(l->value, f->value, "%s: live %llu, frozen %llu", what,
                         (unsigned long long)l->value,
                         (unsigned long long)f->value);
            break;
        case ABI_PIN_GE:
            cr_expect_geq(l->value, f->value,
                          "%s: live %llu is smaller than frozen %llu (structs "
                          "and the minor may only grow)",
                          what, (unsigned long long)l->value,
                          (unsigned long long)f->value);
            break;
        case ABI_PIN_ONE:
            /* The frozen side checks that this file matches the 1.0 header;
             * the live side that the header still declares that type. */
            cr_expect_eq(f->value, 1, "frozen header: %s does not hold", what);
            cr_expect_eq(l->value, 1, "live header: %s no longer holds", what);
            break;
        default:
            cr_expect_fail("%s: unknown relation %d", what, f->rel);
        }
    }
}

/* The frozen copy is the 1.0 header: catch a copy taken from elsewhere. */
Test(frozen_pins, frozen_copy_is_abi_1_0)
{
    size_t n;
    const struct abi_pin *frozen = abi_pins_frozen(&n);
    cr_assert_gt(n, 1);
    cr_assert_str_eq(frozen[0].what, "SBX_ABI_MAJOR");
    cr_assert_eq(frozen[0].value, 1);
    cr_assert_str_eq(frozen[1].what, "SBX_ABI_MINOR");
    cr_assert_eq(frozen[1].value, 0);
}
