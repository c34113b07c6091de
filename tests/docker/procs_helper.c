/*
 * procs_helper.c - a second host process for tests/docker/test_procs.c:
 *
 *   test_procs_helper KEY REF OUTFILE
 *
 * attaches the sandbox (its own provider instance, through the plugin
 * ABI), starts a process that writes numbered lines forever, prints its
 * id on stdout, then reads its output by cursor, appending every byte to
 * OUTFILE before asking for more - until it is killed, which is what the
 * test does mid-stream.
 */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct file_sink {
    int fd;
};

static int to_file(void *ctx, const void *p, size_t n)
{
    struct file_sink *f = ctx;
    return write(f->fd, p, n) == (ssize_t)n ? 0 : SBX_E_IO;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    struct dh h;
    char msg[2048];
    if (dh_try_open(&h, NULL, NULL, msg, sizeof msg) != SBX_OK) {
        fprintf(stderr, "init: %s\n", msg);
        return 1;
    }
    sbx_sandbox *sb;
    if (dh_attach(&h, argv[1], argv[2], &sb, msg, sizeof msg) != SBX_OK) {
        fprintf(stderr, "attach: %s\n", msg);
        return 1;
    }
    const char *cmd[] = {"sh", "-c", "i=0; while :; do i=$((i+1)); echo line$i; "
                                     "[ $((i % 50)) = 0 ] && sleep 0.01; done",
                         NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = cmd};
    char id[SBX_PROC_ID_MAX];
    struct sbx_call c;
    dh_call_init(&c);
    if (h.ops->proc_start(sb, &c, &spec, id) != SBX_OK) {
        fprintf(stderr, "proc_start: %s\n", c.message);
        return 1;
    }
    printf("%s\n", id);
    fflush(stdout);
    struct file_sink f = {open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    struct sbx_sink out = {sizeof out, &f, to_file};
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 1000, .max_bytes = 4096,
                                   .out = &out};
    for (;;) {
        struct sbx_proc_read_result r = {.size = sizeof r};
        if (h.ops->proc_read(sb, &c, id, &a, &r) != SBX_OK) {
            fprintf(stderr, "proc_read: %s\n", c.message);
            return 1;
        }
        if (r.out_lost)
            return 3; /* the test reads fast enough for none */
        a.out_cursor = r.out_cursor;
    }
}
