/*
 * test_libsbx_1_2.c - the checks libsbx's ABI 1.2 wrappers make of their
 * own (host/api/processes.c, file_ops.c, ports.c), through "cfproc":
 * malformed ids and arguments are refused before the provider sees them,
 * a provider without the capability is SBX_E_UNSUPPORTED naming it, and a
 * provider's answer that breaks the contract (a cursor that does not add
 * up, a listed name with '/', a malformed process id) is SBX_E_PROTOCOL.
 */
#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static sbx_ctx *ctx;
static sbx_provider *prov;
static sbx_handle *h;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* A context with provider `name` (cfproc or cfixture) in break `mode`,
 * and a sandbox of it. */
static void open_with(const char *name, const char *mode)
{
    snprintf(dir, sizeof dir, "/tmp/sbx-libsbx12-XXXXXX");
    cr_assert(mkdtemp(dir));
    char config[128];
    snprintf(config, sizeof config, "%s/sbx.yaml", dir);
    FILE *f = fopen(config, "w");
    cr_assert(f);
    fprintf(f, "providers:\n  %s:\n    root: %s/ws\n    inner: %s/local.so\n    break: %s\n",
            name, dir, SBX_TEST_PROVIDER_DIR, mode);
    cr_assert_eq(fclose(f), 0);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = config;
    o.plugin_path = SBX_TEST_CF_FIXTURE_DIR ":" SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &ctx, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_provider_lookup(ctx, name, &prov, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_create(prov, "libsbx-1.2", NULL, NULL, &h, &err), SBX_OK, "%s",
                 err.message);
}

static void cleanup(void)
{
    sbx_error err;
    if (h) {
        char ref[SBX_REF_MAX];
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
        sbx_release(h);
        sbx_destroy(prov, "libsbx-1.2", ref, NULL, &err);
        h = NULL;
    }
    if (ctx)
        sbx_close(ctx);
    ctx = NULL;
    if (dir[0])
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    dir[0] = '\0';
}

static void expect(int rc, const sbx_error *err, int want, const char *has, const char *lacks)
{
    cr_expect_eq(rc, want, "status %d (%s), want %d", rc, err->message, want);
    if (has)
        cr_expect(strstr(err->message, has), "message lacks \"%s\": %s", has, err->message);
    if (lacks)
        cr_expect(!strstr(err->message, lacks), "message has \"%s\": %s", lacks, err->message);
}

static const char *sh_argv[] = {"sh", "-c", "echo hi; echo there", NULL};

static void start(char id[SBX_PROC_ID_MAX], sbx_error *err, int want)
{
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.argv = sh_argv;
    int rc = sbx_proc_start(h, &s, id, NULL, err);
    cr_assert_eq(rc, want, "%s", err->message);
}

Test(libsbx_1_2, malformed_ids_are_refused_before_the_provider, .fini = cleanup)
{
    open_with("cfproc", "none");
    sbx_error err;
    static const char *const bad[] = {"", "../x", "a/b", "sp ace", "nul\x01", NULL};
    char longid[200];
    memset(longid, 'a', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    struct sbx_proc_read_args a = {sizeof a, 0, 0, 0, 0, NULL, NULL};
    struct sbx_proc_read_result r = {.size = sizeof r};
    for (size_t i = 0; i <= 5; i++) {
        const char *id = bad[i] ? bad[i] : longid;
        /* libsbx's message, never the provider's ("cfproc: no process") */
        expect(sbx_proc_read(h, id, &a, &r, NULL, &err), &err, SBX_E_INVALID,
               "is not a process id", "cfproc");
        expect(sbx_proc_write(h, id, "x", 1, 0, NULL, &err), &err, SBX_E_INVALID,
               "is not a process id", "cfproc");
        expect(sbx_proc_signal(h, id, 15, NULL, &err), &err, SBX_E_INVALID,
               "is not a process id", "cfproc");
        expect(sbx_proc_resize(h, id, 24, 80, NULL, &err), &err, SBX_E_INVALID,
               "is not a process id", "cfproc");
    }
    expect(sbx_proc_read(h, NULL, &a, &r, NULL, &err), &err, SBX_E_INVALID,
           "is not a process id", NULL);
    /* well-formed but unknown: the provider's answer */
    expect(sbx_proc_read(h, "fxp-999-00000000", &a, &r, NULL, &err), &err, SBX_E_NOT_FOUND,
           "cfproc: no process", NULL);
}

Test(libsbx_1_2, bad_arguments_are_refused_before_the_provider, .fini = cleanup)
{
    open_with("cfproc", "none");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.argv = sh_argv;
    s.flags = 0x8;
    expect(sbx_proc_start(h, &s, id, NULL, &err), &err, SBX_E_INVALID, "unknown flags", NULL);
    s.flags = 0;
    s.reserved = 1;
    expect(sbx_proc_start(h, &s, id, NULL, &err), &err, SBX_E_INVALID, "reserved", NULL);
    s.reserved = 0;
    s.timeout_ms = -1;
    expect(sbx_proc_start(h, &s, id, NULL, &err), &err, SBX_E_INVALID, "negative timeout",
           NULL);
    s.timeout_ms = 0;
    s.size = 4; /* does not cover argv */
    expect(sbx_proc_start(h, &s, id, NULL, &err), &err, SBX_E_INVALID, "size", NULL);
    const char *empty[] = {NULL};
    s.size = sizeof s;
    s.argv = empty;
    expect(sbx_proc_start(h, &s, id, NULL, &err), &err, SBX_E_INVALID, "no command", NULL);
    s.argv = sh_argv;
    start(id, &err, SBX_OK);
    expect(sbx_proc_signal(h, id, 0, NULL, &err), &err, SBX_E_INVALID, "not a signal number",
           "cfproc");
    expect(sbx_proc_signal(h, id, 65, NULL, &err), &err, SBX_E_INVALID, "not a signal number",
           "cfproc");
    expect(sbx_proc_resize(h, id, 0, 80, NULL, &err), &err, SBX_E_INVALID,
           "is not a window size", "cfproc");
    expect(sbx_proc_write(h, id, NULL, 3, 0, NULL, &err), &err, SBX_E_INVALID, "no data", NULL);
    expect(sbx_proc_write(h, id, "x", 1, 0x10, NULL, &err), &err, SBX_E_INVALID,
           "unknown flags", NULL);
    struct sbx_proc_read_args a = {sizeof a, 0, 0, 0, 0, NULL, NULL};
    struct sbx_proc_read_result r = {.size = 8};
    expect(sbx_proc_read(h, id, &a, &r, NULL, &err), &err, SBX_E_INVALID, "size", NULL);
    struct sbx_proc_list_sink ls = {sizeof ls, NULL, NULL};
    expect(sbx_proc_list(h, &ls, NULL, &err), &err, SBX_E_INVALID, "entry", NULL);

    /* file ops */
    expect(sbx_file_mkdir(h, "d", 04755, 0, NULL, &err), &err, SBX_E_INVALID, "out of range",
           "cfproc");
    expect(sbx_file_mkdir(h, "d", 0, 0x2, NULL, &err), &err, SBX_E_INVALID, "out of range",
           "cfproc");
    expect(sbx_file_mkdir(h, "", 0, 0, NULL, &err), &err, SBX_E_INVALID,
           "the workspace root itself", NULL);
    expect(sbx_file_remove(h, ".", SBX_REMOVE_RECURSIVE, NULL, &err), &err, SBX_E_INVALID,
           "the workspace root itself", NULL);
    expect(sbx_file_remove(h, "x", 0x4, NULL, &err), &err, SBX_E_INVALID, "unknown flags",
           NULL);
    expect(sbx_file_rename(h, "a", "", 0, NULL, &err), &err, SBX_E_INVALID,
           "the workspace root itself", NULL);
    expect(sbx_file_rename(h, "a", "b", 0x2, NULL, &err), &err, SBX_E_INVALID,
           "unknown flags", NULL);
    char *longpath = malloc(5000);
    cr_assert(longpath);
    memset(longpath, 'a', 4999);
    longpath[4999] = '\0';
    expect(sbx_file_remove(h, longpath, 0, NULL, &err), &err, SBX_E_INVALID, "4096 bytes",
           NULL);
    free(longpath);
    struct sbx_file_info fi = {.size = 8};
    expect(sbx_file_stat(h, "", &fi, NULL, &err), &err, SBX_E_INVALID, "size", NULL);

    /* ports */
    struct sbx_port_endpoint ep = {.size = sizeof ep};
    expect(sbx_port_resolve(h, 0, &ep, NULL, &err), &err, SBX_E_INVALID, "not a TCP port",
           NULL);
    expect(sbx_port_resolve(h, 70000, &ep, NULL, &err), &err, SBX_E_INVALID,
           "not a TCP port", NULL);
    expect(sbx_port_resolve(h, 8080, &ep, NULL, &err), &err, SBX_E_NOT_FOUND,
           "was not declared", NULL);
}

Test(libsbx_1_2, a_provider_without_the_capabilities_is_unsupported, .fini = cleanup)
{
    open_with("cfixture", "none");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.argv = sh_argv;
    expect(sbx_proc_start(h, &s, id, NULL, &err), &err, SBX_E_UNSUPPORTED, "processes", NULL);
    s.flags = SBX_PROC_PTY;
    expect(sbx_proc_start(h, &s, id, NULL, &err), &err, SBX_E_UNSUPPORTED, "pty", NULL);
    expect(sbx_proc_resize(h, "x", 24, 80, NULL, &err), &err, SBX_E_UNSUPPORTED, "pty", NULL);
    struct sbx_file_info fi = {.size = sizeof fi};
    expect(sbx_file_stat(h, "", &fi, NULL, &err), &err, SBX_E_UNSUPPORTED, "file_ops", NULL);
    struct sbx_port_endpoint ep = {.size = sizeof ep};
    expect(sbx_port_resolve(h, 80, &ep, NULL, &err), &err, SBX_E_UNSUPPORTED, "ports", NULL);
    /* a create asking for ports is refused at admission */
    const uint16_t ports[] = {8080, 0};
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    co.ports = ports;
    sbx_handle *h2 = NULL;
    expect(sbx_create(prov, "libsbx-1.2-ports", &co, NULL, &h2, &err), &err,
           SBX_E_UNSUPPORTED, "ports", NULL);
    cr_assert_null(h2);
}

Test(libsbx_1_2, a_cursor_that_does_not_add_up_is_a_protocol_error, .fini = cleanup)
{
    open_with("cfproc", "cursor_skips");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    start(id, &err, SBX_OK);
    usleep(200 * 1000);
    struct sbx_proc_read_args a = {sizeof a, 2000, 0, 0, 0, NULL, NULL};
    struct sbx_proc_read_result r = {.size = sizeof r};
    expect(sbx_proc_read(h, id, &a, &r, NULL, &err), &err, SBX_E_PROTOCOL,
           "proc_read on stdout moved the cursor from 0 to", NULL);
    cr_expect(strstr(err.message, "provider \"cfproc\""), "%s", err.message);
}

Test(libsbx_1_2, the_same_read_intact_adds_up, .fini = cleanup)
{
    open_with("cfproc", "none");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    start(id, &err, SBX_OK);
    usleep(200 * 1000);
    /* no sinks: the bytes are skipped, the cursor still moves by them */
    struct sbx_proc_read_args a = {sizeof a, 2000, 0, 0, 0, NULL, NULL};
    struct sbx_proc_read_result r = {.size = sizeof r};
    cr_assert_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(r.out_cursor, 9);
    cr_expect_eq(r.out_lost, 0);
    /* max_bytes caps what is delivered */
    a.max_bytes = 3;
    a.out_cursor = 0;
    cr_assert_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(r.out_cursor, 3);
}

static int count_entry(void *ud, const struct sbx_file_info *info)
{
    (void)info;
    ++*(unsigned *)ud;
    return 0;
}

Test(libsbx_1_2, a_listed_name_with_a_slash_never_reaches_the_caller, .fini = cleanup)
{
    open_with("cfproc", "list_name_slash");
    sbx_error err;
    struct sbx_memory_source m = {"x", 1, 0};
    struct sbx_source src = sbx_memory_source(&m);
    cr_assert_eq(sbx_write(h, "f", &src, 0, NULL, &err), SBX_OK, "%s", err.message);
    unsigned seen = 0;
    struct sbx_file_list_sink ls = {sizeof ls, &seen, count_entry};
    expect(sbx_file_list(h, "", &ls, NULL, &err), &err, SBX_E_PROTOCOL,
           "file_list gave a malformed entry", NULL);
    cr_expect_eq(seen, 0, "the caller was given %u entries", seen);
}

Test(libsbx_1_2, a_malformed_process_id_is_a_protocol_error, .fini = cleanup)
{
    open_with("cfproc", "proc_id_malformed");
    sbx_error err;
    char id[SBX_PROC_ID_MAX] = "untouched";
    start(id, &err, SBX_E_PROTOCOL);
    cr_expect(strstr(err.message, "proc_start returned a malformed process id"), "%s",
              err.message);
    cr_expect_str_eq(id, "untouched", "the caller's buffer was written");
}
