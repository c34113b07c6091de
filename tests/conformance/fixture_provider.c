/*
 * fixture_provider.c - "cfixture", a deliberately breakable provider for
 * proving that the conformance suite fails what it should.
 *
 * It wraps the real `local` provider (dlopened from the path in the
 * `inner` key; `root` is read by local through the same host table) and
 * can break one contract at a time, chosen by the `break` key:
 *   none                  behave like local (the suite must pass)
 *   attach_ignores_owner  attach opens the sandbox whatever the key
 *   stderr_to_stdout      exec sends stderr to the stdout sink
 *   read_unconfined       read_file follows any path, even out of the
 *                         workspace (writes stay confined: the fixture
 *                         must never damage the machine it runs on)
 *   hoard_output          exec keeps a copy of all stdout in memory
 *
 * Its references are "fx<&>:" + hex(session key) + ":" + local's reference:
 * the owner's key travels in the reference so that the broken attach can
 * open the sandbox for anybody, and the markup characters make sure the
 * suite's reports escape references it quotes.
 */
#include <sbx/provider.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FX_PREFIX "fx<&>:"

enum fx_break {
    FX_NONE,
    FX_ATTACH_IGNORES_OWNER,
    FX_STDERR_TO_STDOUT,
    FX_READ_UNCONFINED,
    FX_HOARD_OUTPUT
};

struct fx_state {
    const struct sbx_host *host;
    const struct sbx_provider_ops *inner;
    void *inner_state;
    enum fx_break mode;
};

struct sbx_sandbox {
    struct fx_state *st;
    sbx_sandbox *inner; /* local's handle */
};

static int fx_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    const char *inner_path = host->config_get(host, "inner");
    const char *mode = host->config_get(host, "break");
    if (!inner_path)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "cfixture: key 'inner' (path of local.so) is required");
    enum fx_break m = FX_NONE;
    if (!mode || !strcmp(mode, "none"))
        m = FX_NONE;
    else if (!strcmp(mode, "attach_ignores_owner"))
        m = FX_ATTACH_IGNORES_OWNER;
    else if (!strcmp(mode, "stderr_to_stdout"))
        m = FX_STDERR_TO_STDOUT;
    else if (!strcmp(mode, "read_unconfined"))
        m = FX_READ_UNCONFINED;
    else if (!strcmp(mode, "hoard_output"))
        m = FX_HOARD_OUTPUT;
    else
        return host->set_error(host, call, SBX_E_CONFIG,
                               "cfixture: unknown break mode '%s'", mode);
    /* Never dlclosed, like every provider. */
    void *dl = dlopen(inner_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return host->set_error(host, call, SBX_E_CONFIG, "cfixture: %s", dlerror());
    sbx_provider_describe_fn describe =
        (sbx_provider_describe_fn)dlsym(dl, SBX_PROVIDER_ENTRY);
    const struct sbx_provider_desc *d = describe ? describe() : NULL;
    if (!d || d->abi_major != SBX_ABI_MAJOR || !d->ops)
        return host->set_error(host, call, SBX_E_ABI,
                               "cfixture: %s is not a provider of this ABI",
                               inner_path);
    struct fx_state *st = calloc(1, sizeof *st);
    if (!st)
        return host->set_error(host, call, SBX_E_NOMEM, "cfixture: out of memory");
    st->host = host;
    st->inner = d->ops;
    st->mode = m;
    int rc = st->inner->init(host, call, &st->inner_state);
    if (rc != SBX_OK) {
        free(st);
        return rc;
    }
    *state = st;
    return SBX_OK;
}

static void fx_fini(void *state)
{
    struct fx_state *st = state;
    st->inner->fini(st->inner_state);
    free(st);
}

static int wrap(struct fx_state *st, sbx_call *call, sbx_sandbox *inner,
                sbx_sandbox **out)
{
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        st->inner->release(inner);
        return st->host->set_error(st->host, call, SBX_E_NOMEM,
                                   "cfixture: out of memory");
    }
    sb->st = st;
    sb->inner = inner;
    *out = sb;
    return SBX_OK;
}

static int fx_create(void *state, sbx_call *call, const struct sbx_create_args *args,
                     char *ref, sbx_sandbox **out)
{
    struct fx_state *st = state;
    char inner_ref[SBX_REF_MAX];
    sbx_sandbox *inner = NULL;
    int rc = st->inner->create(st->inner_state, call, args, inner_ref, &inner);
    if (rc != SBX_OK)
        return rc;
    if (strlen(FX_PREFIX) + SBX_KEY_HASH_LEN + 1 + strlen(inner_ref) >= SBX_REF_MAX) {
        st->inner->release(inner);
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "cfixture: inner reference too long");
    }
    size_t used = (size_t)snprintf(ref, SBX_REF_MAX, "%s%s:", FX_PREFIX, args->key_hash);
    memcpy(ref + used, inner_ref, strlen(inner_ref) + 1);
    return wrap(st, call, inner, out);
}

/* Split a reference into the owner's key hash and local's reference. */
static int parse_ref(struct fx_state *st, sbx_call *call, const char *ref,
                     char owner[SBX_KEY_HASH_LEN + 1], const char **inner_ref)
{
    size_t pl = strlen(FX_PREFIX);
    if (strncmp(ref, FX_PREFIX, pl) != 0 || strlen(ref) < pl + SBX_KEY_HASH_LEN + 1 ||
        ref[pl + SBX_KEY_HASH_LEN] != ':')
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "cfixture: not a cfixture reference");
    memcpy(owner, ref + pl, SBX_KEY_HASH_LEN);
    owner[SBX_KEY_HASH_LEN] = '\0';
    *inner_ref = ref + pl + SBX_KEY_HASH_LEN + 1;
    return SBX_OK;
}

static int fx_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                     sbx_sandbox **out)
{
    struct fx_state *st = state;
    char owner[SBX_KEY_HASH_LEN + 1];
    const char *inner_ref = NULL;
    int rc = parse_ref(st, call, args->ref, owner, &inner_ref);
    if (rc != SBX_OK)
        return rc;
    struct sbx_attach_args inner_args = *args;
    inner_args.ref = inner_ref;
    /* The deliberate defect: the caller's key is not checked. */
    if (st->mode == FX_ATTACH_IGNORES_OWNER)
        inner_args.key_hash = owner;
    sbx_sandbox *inner = NULL;
    rc = st->inner->attach(st->inner_state, call, &inner_args, &inner);
    if (rc != SBX_OK)
        return rc;
    return wrap(st, call, inner, out);
}

static int fx_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct fx_state *st = state;
    char owner[SBX_KEY_HASH_LEN + 1];
    const char *inner_ref = NULL;
    int rc = parse_ref(st, call, args->ref, owner, &inner_ref);
    if (rc != SBX_OK)
        return rc;
    struct sbx_destroy_args inner_args = *args;
    inner_args.ref = inner_ref;
    return st->inner->destroy(st->inner_state, call, &inner_args);
}

/* The deliberate defect of hoard_output: a sink that keeps everything. */
struct hoard {
    const struct sbx_sink *next;
    unsigned char *buf;
    size_t len, cap;
};

static int hoard_write(void *ctx, const void *data, size_t len)
{
    struct hoard *h = ctx;
    if (h->len + len > h->cap) {
        size_t cap = (h->len + len) * 2;
        unsigned char *nb = realloc(h->buf, cap);
        if (!nb)
            return SBX_E_NOMEM;
        h->buf = nb;
        h->cap = cap;
    }
    memcpy(h->buf + h->len, data, len);
    h->len += len;
    return h->next ? h->next->write(h->next->ctx, data, len) : SBX_OK;
}

static int fx_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                   struct sbx_exec_result *res)
{
    struct sbx_exec_args a = *args;
    if (sb->st->mode == FX_STDERR_TO_STDOUT)
        a.err = a.out; /* the deliberate defect */
    if (sb->st->mode != FX_HOARD_OUTPUT)
        return sb->st->inner->exec(sb->inner, call, &a, res);
    struct hoard h = {args->out, NULL, 0, 0};
    struct sbx_sink hoarding = SBX_SINK_INIT(&h, hoard_write);
    a.out = &hoarding;
    int rc = sb->st->inner->exec(sb->inner, call, &a, res);
    free(h.buf);
    return rc;
}

/* The deliberate defect: a plain open() of root/path. */
static int read_unconfined(sbx_sandbox *sb, sbx_call *call, const char *path,
                           const struct sbx_sink *sink)
{
    const struct sbx_host *host = sb->st->host;
    char full[PATH_MAX];
    const char *root = sb->st->inner->root(sb->inner);
    if (path[0] == '/')
        snprintf(full, sizeof full, "%s", path);
    else
        snprintf(full, sizeof full, "%s/%s", root, path);
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return host->set_error(host, call,
                               errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                               "cfixture: %s: %s", path, strerror(errno));
    char buf[4096];
    ssize_t n;
    int rc = SBX_OK;
    while (rc == SBX_OK && (n = read(fd, buf, sizeof buf)) > 0)
        rc = sink->write(sink->ctx, buf, (size_t)n);
    close(fd);
    return rc;
}

static int fx_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                        const struct sbx_sink *sink)
{
    if (sb->st->mode == FX_READ_UNCONFINED)
        return read_unconfined(sb, call, path, sink);
    return sb->st->inner->read_file(sb->inner, call, path, sink);
}

static int fx_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                         const struct sbx_source *src, unsigned mode)
{
    return sb->st->inner->write_file(sb->inner, call, path, src, mode);
}

static const char *fx_root(sbx_sandbox *sb)
{
    return sb->st->inner->root(sb->inner);
}

static void fx_release(sbx_sandbox *sb)
{
    sb->st->inner->release(sb->inner);
    free(sb);
}

static const struct sbx_provider_ops fx_ops = {
    .init = fx_init,
    .fini = fx_fini,
    .create = fx_create,
    .attach = fx_attach,
    .exec = fx_exec,
    .read_file = fx_read_file,
    .write_file = fx_write_file,
    .root = fx_root,
    .release = fx_release,
    .destroy = fx_destroy,
};

static const struct sbx_config_key fx_keys[] = {
    SBX_CONFIG_KEY("root", SBX_CFG_STRING, "workspace root, passed on to local"),
    SBX_CONFIG_KEY("inner", SBX_CFG_STRING, "path of the local provider's .so"),
    SBX_CONFIG_KEY("break", SBX_CFG_STRING, "which contract to break (see the source)"),
    SBX_CONFIG_KEYS_END,
};

SBX_PROVIDER_DEFINE("cfixture", "0.0.1", "local, with one contract broken on purpose",
                    SBX_ISOLATION_NONE, 0, &fx_ops, fx_keys)
