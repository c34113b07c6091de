/*
 * proc_prog.c - a second host process for the process tests of the
 * `local` provider, linking libsbx like the sbx CLI does:
 *
 *   local_proc_prog ROOT KEY start ARGV...
 *       create (or find) KEY's sandbox, start ARGV, print "REF ID"
 *   local_proc_prog ROOT KEY REF follow ID CURSORFILE DATAFILE
 *       attach REF, read ID from the cursor CURSORFILE holds (0 when
 *       absent) until its end: each chunk is written into DATAFILE at its
 *       own offset (the cursor), then the new cursor replaces CURSORFILE's.
 *       Prints "exit CODE lost N" at the end. Killed with SIGKILL midway,
 *       a second run continues where the first left.
 *
 * Exit status 0 on success, 1 with a message on stderr.
 */
#include <sbx/sbx.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what, const sbx_error *err)
{
    fprintf(stderr, "local_proc_prog: %s: %s\n", what, err ? err->message : strerror(errno));
    return 1;
}

static sbx_provider *open_local(const char *root, sbx_ctx **ctx, sbx_error *err)
{
    char cfg[4096];
    snprintf(cfg, sizeof cfg, "%s.yaml", root);
    FILE *f = fopen(cfg, "w");
    if (!f)
        return NULL;
    fprintf(f, "providers:\n  local:\n    root: %s\n", root);
    fclose(f);
    struct sbx_options o = {
        .size = sizeof o, .config_path = cfg, .provider = "local",
        .plugin_path = SBX_TEST_PROVIDER_DIR, .ignore_environment = true,
    };
    sbx_provider *p = NULL;
    if (sbx_open(&o, ctx, err) != SBX_OK || sbx_provider_lookup(*ctx, "local", &p, err) != SBX_OK)
        return NULL;
    return p;
}

struct file_sink {
    int fd;
    uint64_t off;
};

static int at_offset(void *ctx, const void *buf, size_t len)
{
    struct file_sink *s = ctx;
    if (pwrite(s->fd, buf, len, (off_t)s->off) != (ssize_t)len)
        return SBX_E_IO;
    s->off += len;
    return 0;
}

static uint64_t read_cursor(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (f) {
        if (fscanf(f, "%llu", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

static int write_cursor(const char *path, uint64_t v)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%llu\n", (unsigned long long)v);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_ctx *ctx = NULL;
    sbx_provider *p = open_local(argv[1], &ctx, &err);
    if (!p)
        return fail("open", &err);
    sbx_handle *h = NULL;
    if (strcmp(argv[3], "start") == 0) {
        struct sbx_create_options co = {.size = sizeof co};
        if (sbx_create(p, argv[2], &co, NULL, &h, &err) != SBX_OK)
            return fail("create", &err);
        struct sbx_proc_spec spec = {.size = sizeof spec, .argv = (const char *const *)argv + 4};
        char id[SBX_PROC_ID_MAX];
        if (sbx_proc_start(h, &spec, id, NULL, &err) != SBX_OK)
            return fail("proc_start", &err);
        printf("%s %s\n", sbx_handle_ref(h), id);
    } else if (argc == 8 && strcmp(argv[4], "follow") == 0) {
        if (sbx_attach(p, argv[2], argv[3], NULL, &h, &err) != SBX_OK)
            return fail("attach", &err);
        struct file_sink fs = {open(argv[7], O_WRONLY | O_CREAT | O_CLOEXEC, 0644),
                               read_cursor(argv[6])};
        if (fs.fd < 0)
            return fail(argv[7], NULL);
        struct sbx_sink sink = SBX_SINK_INIT(&fs, at_offset);
        uint64_t lost = 0;
        for (;;) {
            struct sbx_proc_read_args ra = {.size = sizeof ra, .wait_ms = 1000,
                                            .out_cursor = fs.off, .out = &sink};
            struct sbx_proc_read_result res = {.size = sizeof res};
            if (sbx_proc_read(h, argv[5], &ra, &res, NULL, &err) != SBX_OK)
                return fail("proc_read", &err);
            lost += res.out_lost;
            fs.off = res.out_cursor;
            if (write_cursor(argv[6], fs.off) != 0)
                return fail(argv[6], NULL);
            if (res.eof) {
                printf("exit %d lost %llu\n", res.exit_code, (unsigned long long)lost);
                break;
            }
        }
        close(fs.fd);
    } else {
        return 2;
    }
    sbx_release(h);
    sbx_close(ctx);
    return 0;
}
