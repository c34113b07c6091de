/*
 * fixture.c - per-case state: verdicts, contexts, sandboxes and cleanup.
 *
 * Everything a case opens goes through here so that the runner can undo
 * it when the case ends, passed or not: handles are released, every
 * sandbox created is destroyed (through a context of its own when the case
 * closed them all) and contexts are closed.
 */
#include "cf_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int cf_test_init(struct cf_test *t, const struct cf_case *c,
                 const struct sbx_options *open_opts, const char *provider)
{
    memset(t, 0, sizeof *t);
    t->c = c;
    t->open_opts = open_opts;
    t->provider = provider;
    t->outcome = SBX_CONFORMANCE_PASS;
    t->report_fd = -1;

    unsigned char rnd[16];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return SBX_E_IO;
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof rnd; i++) {
        t->token[2 * i] = hex[rnd[i] >> 4];
        t->token[2 * i + 1] = hex[rnd[i] & 15];
    }
    t->token[32] = '\0';
    return SBX_OK;
}

static void vrecord(struct cf_test *t, int outcome, const char *fmt, va_list ap)
{
    t->outcome = outcome;
    vsnprintf(t->message, sizeof t->message, fmt, ap);
}

bool cf_fail(struct cf_test *t, const char *fmt, ...)
{
    if (t->outcome == SBX_CONFORMANCE_FAIL)
        return false; /* the first failure explains the case best */
    va_list ap;
    va_start(ap, fmt);
    vrecord(t, SBX_CONFORMANCE_FAIL, fmt, ap);
    va_end(ap);
    /* Told at once: should the process die later (in the cleanup, say),
     * the runner can still say what had gone wrong first. */
    cf_channel_send(t->report_fd, CF_REC_FAILURE, t->message, "");
    return false;
}

void cf_skip(struct cf_test *t, const char *fmt, ...)
{
    if (t->outcome != SBX_CONFORMANCE_PASS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vrecord(t, SBX_CONFORMANCE_SKIP, fmt, ap);
    va_end(ap);
}

bool cf_failed(const struct cf_test *t)
{
    return t->outcome == SBX_CONFORMANCE_FAIL;
}

const char *cf_status_name(int status)
{
    switch ((sbx_status)status) {
    case SBX_OK: return "SBX_OK";
    case SBX_E_NOT_FOUND: return "SBX_E_NOT_FOUND";
    case SBX_E_DENIED: return "SBX_E_DENIED";
    case SBX_E_UNSUPPORTED: return "SBX_E_UNSUPPORTED";
    case SBX_E_INVALID: return "SBX_E_INVALID";
    case SBX_E_TIMEOUT: return "SBX_E_TIMEOUT";
    case SBX_E_CANCELLED: return "SBX_E_CANCELLED";
    case SBX_E_UNAVAILABLE: return "SBX_E_UNAVAILABLE";
    case SBX_E_PROTOCOL: return "SBX_E_PROTOCOL";
    case SBX_E_IO: return "SBX_E_IO";
    case SBX_E_NOMEM: return "SBX_E_NOMEM";
    case SBX_E_EXISTS: return "SBX_E_EXISTS";
    case SBX_E_CONFIG: return "SBX_E_CONFIG";
    case SBX_E_ABI: return "SBX_E_ABI";
    case SBX_E_NOT_EXEC: return "SBX_E_NOT_EXEC";
    case SBX_E_NO_COMMAND: return "SBX_E_NO_COMMAND";
    case SBX_E_INTERNAL: return "SBX_E_INTERNAL";
    }
    return "unknown status";
}

bool cf_expect_ok(struct cf_test *t, int status, const sbx_error *err,
                  const char *what)
{
    if (status == SBX_OK)
        return true;
    return cf_fail(t, "%s: %s: %s", what, cf_status_name(status),
                   err && err->message[0] ? err->message : sbx_strerror(status));
}

/* Open a context into a free slot; returns the slot or -1 with err set. */
static int open_slot(struct cf_test *t, sbx_error *err)
{
    int slot = -1;
    for (int i = 0; i < CF_MAX_CTX; i++) {
        if (!t->ctx[i]) {
            slot = i;
            break;
        }
    }
    if (slot < 0) {
        sbx_error_set(err, SBX_E_INTERNAL, "more than %d contexts in one case",
                      CF_MAX_CTX);
        return -1;
    }
    sbx_ctx *ctx = NULL;
    if (sbx_open(t->open_opts, &ctx, err) != SBX_OK)
        return -1;
    sbx_provider *p = NULL;
    if (sbx_provider_lookup(ctx, t->provider, &p, err) != SBX_OK) {
        sbx_close(ctx);
        return -1;
    }
    t->ctx[slot] = ctx;
    t->prov[slot] = p;
    return slot;
}

sbx_provider *cf_open(struct cf_test *t)
{
    sbx_error err;
    sbx_error_clear(&err);
    int slot = open_slot(t, &err);
    if (slot < 0) {
        cf_expect_ok(t, err.status ? err.status : SBX_E_INTERNAL, &err,
                     "opening a host context");
        return NULL;
    }
    return t->prov[slot];
}

static bool remember_sandbox(struct cf_test *t, const char *key, const char *ref);

static int slot_of(const struct cf_test *t, const sbx_provider *p)
{
    for (int i = 0; i < CF_MAX_CTX; i++)
        if (t->ctx[i] && t->prov[i] == p)
            return i;
    return -1;
}

void cf_close(struct cf_test *t, sbx_provider *p)
{
    int slot = slot_of(t, p);
    if (slot < 0)
        return;
    for (size_t i = 0; i < CF_MAX_HANDLES; i++) {
        if (t->handles[i].h && t->handles[i].ctx == slot) {
            sbx_release(t->handles[i].h);
            t->handles[i].h = NULL;
        }
    }
    sbx_close(t->ctx[slot]);
    t->ctx[slot] = NULL;
    t->prov[slot] = NULL;
}

void cf_new_key(struct cf_test *t, char *key)
{
    t->keys++;
    snprintf(key, CF_KEY_MAX, "sbx-conformance/%s/%s/%u", t->c->name, t->token,
             t->keys);
}

void cf_track(struct cf_test *t, sbx_provider *p, sbx_handle *h)
{
    int slot = slot_of(t, p);
    for (size_t i = 0; slot >= 0 && i < CF_MAX_HANDLES; i++) {
        if (!t->handles[i].h) {
            t->handles[i].h = h;
            t->handles[i].ctx = slot;
            return;
        }
    }
    sbx_release(h);
    cf_fail(t, "internal: more than %d handles in one case", CF_MAX_HANDLES);
}

void cf_release(struct cf_test *t, sbx_handle *h)
{
    for (size_t i = 0; i < CF_MAX_HANDLES; i++) {
        if (t->handles[i].h == h) {
            sbx_release(h);
            t->handles[i].h = NULL;
            return;
        }
    }
}

/* Remember (key, ref) for the cleanup, once. */
sbx_ctx *cf_ctx_of(struct cf_test *t, const sbx_provider *p)
{
    int slot = slot_of(t, p);
    return slot < 0 ? NULL : t->ctx[slot];
}

bool cf_remember(struct cf_test *t, const char *key, const char *ref)
{
    return remember_sandbox(t, key, ref);
}

static bool remember_sandbox(struct cf_test *t, const char *key, const char *ref)
{
    for (size_t i = 0; i < t->nsandboxes; i++)
        if (!strcmp(t->sandboxes[i].key, key) && !strcmp(t->sandboxes[i].ref, ref))
            return true;
    if (t->nsandboxes == CF_MAX_SANDBOXES)
        return cf_fail(t, "internal: more than %d sandboxes in one case",
                       CF_MAX_SANDBOXES);
    struct cf_tracked_sandbox *s = &t->sandboxes[t->nsandboxes++];
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->ref, sizeof s->ref, "%s", ref);
    /* Before the case goes on to use it: if the provider kills the process
     * from now on, the runner knows what to destroy. */
    cf_channel_send(t->report_fd, CF_REC_SANDBOX, s->key, s->ref);
    return true;
}

sbx_handle *cf_create(struct cf_test *t, sbx_provider *p, const char *key)
{
    return cf_create_egress(t, p, key, NULL);
}

static sbx_handle *create_with(struct cf_test *t, sbx_provider *p, const char *key,
                               const struct sbx_egress_policy *egress,
                               const uint16_t *ports);

sbx_handle *cf_create_egress(struct cf_test *t, sbx_provider *p, const char *key,
                             const struct sbx_egress_policy *egress)
{
    return create_with(t, p, key, egress, NULL);
}

sbx_handle *cf_create_ports(struct cf_test *t, sbx_provider *p, const char *key,
                            const uint16_t *ports)
{
    return create_with(t, p, key, NULL, ports);
}

static sbx_handle *create_with(struct cf_test *t, sbx_provider *p, const char *key,
                               const struct sbx_egress_policy *egress,
                               const uint16_t *ports)
{
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    co.caps_required = t->c->caps;
    co.egress = egress;
    co.ports = ports;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_handle *h = NULL;
    int rc = sbx_create(p, key, &co, NULL, &h, &err);
    if (!cf_expect_ok(t, rc, &err, "create"))
        return NULL;
    const char *ref = sbx_handle_ref(h);
    if (!ref || !*ref) {
        sbx_release(h);
        cf_fail(t, "create returned an empty reference");
        return NULL;
    }
    if (strlen(ref) >= SBX_REF_MAX) {
        sbx_release(h);
        cf_fail(t, "create returned a reference longer than SBX_REF_MAX");
        return NULL;
    }
    if (!remember_sandbox(t, key, ref)) {
        sbx_release(h);
        return NULL;
    }
    cf_track(t, p, h);
    return cf_failed(t) ? NULL : h;
}

sbx_handle *cf_sandbox(struct cf_test *t, sbx_provider **pout)
{
    sbx_provider *p = cf_open(t);
    if (!p)
        return NULL;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    if (pout)
        *pout = p;
    return cf_create(t, p, key);
}

sbx_handle *cf_attach_after_restart(struct cf_test *t, sbx_provider *p, sbx_handle *h)
{
    char ref[SBX_REF_MAX], key[CF_KEY_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    snprintf(key, sizeof key, "%s", t->sandboxes[t->nsandboxes - 1].key);
    cf_close(t, p); /* the restart: the first instance is gone, h with it */
    sbx_provider *p2 = cf_open(t);
    if (!p2)
        return NULL;
    sbx_handle *h2 = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_attach(p2, key, ref, NULL, &h2, &err), &err,
                      "attach after a restart"))
        return NULL;
    cf_track(t, p2, h2);
    return h2;
}

void cf_test_cleanup(struct cf_test *t)
{
    for (size_t i = 0; i < CF_MAX_HANDLES; i++) {
        if (t->handles[i].h) {
            sbx_release(t->handles[i].h);
            t->handles[i].h = NULL;
        }
    }
    sbx_error err;
    sbx_error_clear(&err);
    sbx_provider *p = NULL;
    for (int i = 0; i < CF_MAX_CTX && !p; i++)
        p = t->ctx[i] ? t->prov[i] : NULL;
    if (!p && t->nsandboxes > 0) {
        int slot = open_slot(t, &err);
        if (slot >= 0)
            p = t->prov[slot];
        else
            cf_fail(t, "cleanup: opening a host context: %s", err.message);
    }
    for (size_t i = 0; p && i < t->nsandboxes; i++) {
        int rc = sbx_destroy(p, t->sandboxes[i].key, t->sandboxes[i].ref, NULL,
                             &err);
        if (rc == SBX_OK)
            continue;
        if (!cf_failed(t)) {
            cf_fail(t, "cleanup: destroy of %s: %s: %s", t->sandboxes[i].ref,
                    cf_status_name(rc), err.message);
        } else {
            size_t used = strlen(t->message);
            snprintf(t->message + used, sizeof t->message - used,
                     "; cleanup: destroy failed too: %s", cf_status_name(rc));
        }
    }
    for (int i = 0; i < CF_MAX_CTX; i++) {
        if (t->ctx[i]) {
            sbx_close(t->ctx[i]);
            t->ctx[i] = NULL;
            t->prov[i] = NULL;
        }
    }
}

double cf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double cf_bound(double seconds)
{
    const char *v = getenv("SBX_CONFORMANCE_TIME_SCALE");
    char *end = NULL;
    double scale = v && *v ? strtod(v, &end) : 1.0;
    if (!v || !*v || !end || *end || !(scale >= 1.0 && scale <= 10.0))
        scale = 1.0;
    return seconds * scale;
}

void cf_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static const char survivors_script[] =
    "alive() { kill -0 \"$1\" 2>/dev/null || return 1; "
    "if test -r /proc/$1/stat; then read -r s < /proc/$1/stat; "
    "case \"$s\" in *\") Z \"*) return 1;; esac; fi; return 0; }; "
    "i=0; while :; do left=''; "
    "for f in pid child; do "
    "if test -s $f; then p=$(cat $f); if alive \"$p\"; then left=\"$left $f=$p\"; fi; "
    "else left=\"$left no-$f-file\"; fi; done; "
    "test -z \"$left\" && break; test $i -ge 30 && break; "
    "if sleep 0.1 2>/dev/null; then i=$((i+1)); else sleep 1; i=$((i+10)); fi; "
    "done; echo $left";

char *cf_survivors(struct cf_test *t, sbx_handle *h, bool *no_pids)
{
    char *out = cf_sh(t, h, survivors_script);
    if (!out)
        return NULL;
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    *no_pids = strstr(out, "-file") != NULL;
    return out;
}
