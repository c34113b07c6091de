/*
 * bench_stream.c - the docker provider moving big data, through the plugin
 * ABI: peak RSS growth of the process for 256 MiB of exec stdout and for a
 * 256 MiB file read and write, and file write/read throughput against
 * `docker cp` of the same file on the same daemon.
 *
 *   bench_stream HOST IMAGE [RUNS] [MIB]
 *
 * RSS: /proc/self/clear_refs ("5") resets the peak (VmHWM) before each
 * measurement; growth is the peak during the operation minus VmRSS just
 * before it. Data goes to a sink that counts (exec) or to a file on disk
 * (read), never to memory; a write reads from a file on disk. Throughput:
 * the median of RUNS timed transfers of a MIB-MiB file between a host file
 * and /workspace: sbx write_file (from the file, whose source announces
 * its length as libsbx's sbx_fd_source does) and read_file (into a file)
 * vs `docker cp` in both directions.
 */
#include "bench_host.h"
#include "../../tests/support/op_args.h"

#include <sbx/provider.h>

#include <openssl/evp.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *cfg_host, *cfg_image;
static char res_dir[256];

/* VmRSS or VmHWM of this process in KiB. */
static long proc_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f || fputs("5", f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "bench_stream: cannot reset the peak RSS (clear_refs)\n");
        exit(1);
    }
}

static int count_write(void *ctx, const void *p, size_t n)
{
    (void)p;
    *(unsigned long long *)ctx += n;
    return 0;
}

static int fd_write(void *ctx, const void *p, size_t n)
{
    int fd = *(int *)ctx;
    const char *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return SBX_E_IO;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static long fd_read(void *ctx, void *buf, size_t cap)
{
    ssize_t n = read(*(int *)ctx, buf, cap);
    return n < 0 ? -1 : (long)n;
}

/* As libsbx's sbx_fd_source: a regular file announces what is left of it,
 * which lets the provider stream it as a tar. */
static int64_t fd_length(void *ctx)
{
    int fd = *(int *)ctx;
    struct stat st;
    off_t pos = lseek(fd, 0, SEEK_CUR);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || pos < 0 || pos > st.st_size)
        return -1;
    return (int64_t)(st.st_size - pos);
}

static void make_file(const char *path, size_t bytes)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    unsigned char *buf = malloc(1 << 20);
    for (size_t i = 0; i < (1 << 20); i++)
        buf[i] = (unsigned char)(i * 131 + (i >> 11));
    for (size_t done = 0; fd >= 0 && done < bytes; done += 1 << 20)
        if (write(fd, buf, 1 << 20) != 1 << 20)
            break;
    free(buf);
    if (fd < 0 || fsync(fd) != 0 || close(fd) != 0) {
        fprintf(stderr, "bench_stream: cannot write %s\n", path);
        exit(1);
    }
}

static double run_cmd(const char *cmd)
{
    double t0 = bench_now();
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_stream: failed: %s\n", cmd);
        exit(1);
    }
    return bench_now() - t0;
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s HOST IMAGE [RUNS] [MIB]\n", argv[0]);
        return 2;
    }
    cfg_host = argv[1];
    cfg_image = argv[2];
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    long mib = argc > 4 ? atol(argv[4]) : 256;
    if (runs < 1 || runs > 50 || mib < 1 || mib > 4096)
        return 2;
    size_t bytes = (size_t)mib << 20;
    char dir[] = "/tmp/sbx-bench-stream-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    snprintf(res_dir, sizeof res_dir, "%s/res", dir);

    void *so = dlopen(SBX_BENCH_PROVIDER_DIR "/docker.so", RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        fprintf(stderr, "bench_stream: %s\n", dlerror());
        return 1;
    }
    sbx_provider_describe_fn describe =
        (sbx_provider_describe_fn)dlsym(so, SBX_PROVIDER_ENTRY);
    const struct sbx_provider_ops *ops = describe()->ops;
    struct sbx_host host;
    bench_host_init(&host, cfg_host, cfg_image, res_dir);
    sbx_call c = {""};
    void *st = NULL;
    int rc = ops->init(&host, &c, &st);
    if (rc)
        bench_die("bench_stream", "init", rc, &c);
    char key_hash[SBX_KEY_HASH_LEN + 1];
    unsigned char md[32];
    unsigned mdlen = 0;
    EVP_Digest("bench-stream", strlen("bench-stream"), md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(key_hash + 2 * i, 3, "%02x", md[i]);
    struct sbx_create_args ca = {sizeof ca, "bench-stream", key_hash, "", 0, NULL, NULL, NULL};
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    if ((rc = ops->create(st, &c, &ca, ref, &sb)))
        bench_die("bench_stream", "create", rc, &c);

    /* warm up: connections, the exec path, the archive path */
    const char *true_argv[] = {"true", NULL};
    struct sbx_exec_args ea = {sizeof ea, true_argv, NULL, NULL, NULL, 60000, NULL, NULL};
    struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
    if ((rc = ops->exec(sb, &c, &ea, &res)))
        bench_die("bench_stream", "exec true", rc, &c);

    /* 1. RSS: 256 MiB of exec stdout into a counting sink */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "head -c %zu /dev/zero", bytes);
    const char *out_argv[] = {"sh", "-c", cmd, NULL};
    unsigned long long counted = 0;
    struct sbx_sink count = SBX_SINK_INIT(&counted, count_write);
    ea.argv = out_argv;
    ea.out = &count;
    ea.timeout_ms = 600000;
    reset_peak();
    long rss0 = proc_kib("VmRSS");
    double t0 = bench_now();
    if ((rc = ops->exec(sb, &c, &ea, &res)))
        bench_die("bench_stream", "exec head", rc, &c);
    double exec_secs = bench_now() - t0;
    long exec_growth = proc_kib("VmHWM") - rss0;
    if (counted != bytes || res.exit_code != 0) {
        fprintf(stderr, "bench_stream: exec delivered %llu bytes, exit %d\n", counted,
                res.exit_code);
        return 1;
    }

    /* the baseline of 1.: the same bytes through a pipe into `cat` to
     * /dev/null inside the container, no transport at all */
    snprintf(cmd, sizeof cmd, "head -c %zu /dev/zero | cat >/dev/null", bytes);
    const char *cat_argv[] = {"sh", "-c", cmd, NULL};
    ea.argv = cat_argv;
    ea.out = NULL;
    t0 = bench_now();
    if ((rc = ops->exec(sb, &c, &ea, &res)) || res.exit_code)
        bench_die("bench_stream", "exec cat", rc, &c);
    double cat_secs = bench_now() - t0;

    /* 2. throughput: write (sbx vs docker cp), then read */
    char src[300], dst[300];
    snprintf(src, sizeof src, "%s/src.bin", dir);
    snprintf(dst, sizeof dst, "%s/dst.bin", dir);
    make_file(src, bytes);
    double *w_sbx = calloc((size_t)runs, sizeof(double));
    double *w_cp = calloc((size_t)runs, sizeof(double));
    double *n_sbx = calloc((size_t)runs, sizeof(double));
    double *n_cp = calloc((size_t)runs, sizeof(double));
    double *r_sbx = calloc((size_t)runs, sizeof(double));
    double *r_cp = calloc((size_t)runs, sizeof(double));
    long read_growth = -1, write_growth = -1;
    /* Two write measures: a new file, and the replacement of an existing
     * one (sbx renames over it, which on ext4 starts the writeback of the
     * new data at once; docker cp removes the old file first). Both targets
     * of the replacement exist before the first run; every timed write
     * starts after a sync, so none pays for the writeback of another. */
    snprintf(cmd, sizeof cmd, "docker -H %s cp %s %s:/workspace/cp.bin", cfg_host, src,
             ref);
    run_cmd(cmd);
    {
        int fd = open(src, O_RDONLY | O_CLOEXEC);
        struct sbx_source in = {.size = sizeof(struct sbx_source), .ctx = &fd, .read = fd_read, .length = fd_length};
        if ((rc = ops->write_file(sb, &c, "big.bin", &in, 0)))
            bench_die("bench_stream", "write_file", rc, &c);
        close(fd);
    }
    const char *rm_argv[] = {"rm", "-f", "new.bin", "cpnew.bin", NULL};
    struct sbx_exec_args rm_args = {sizeof rm_args, rm_argv, NULL, NULL, NULL, 60000,
                                    NULL, NULL};
    for (int i = 0; i < runs; i++) {
        double *times[2] = {n_sbx, w_sbx};
        const char *names[2] = {"new.bin", "big.bin"};
        if ((rc = ops->exec(sb, &c, &rm_args, &res)))
            bench_die("bench_stream", "exec rm", rc, &c);
        for (int k = 0; k < 2; k++) {
            int fd = open(src, O_RDONLY | O_CLOEXEC);
            struct sbx_source in = {.size = sizeof(struct sbx_source), .ctx = &fd, .read = fd_read, .length = fd_length};
            run_cmd("sync");
            reset_peak();
            rss0 = proc_kib("VmRSS");
            t0 = bench_now();
            if ((rc = ops->write_file(sb, &c, names[k], &in, 0)))
                bench_die("bench_stream", "write_file", rc, &c);
            times[k][i] = bench_now() - t0;
            long wg = proc_kib("VmHWM") - rss0;
            if (wg > write_growth)
                write_growth = wg;
            close(fd);
        }

        snprintf(cmd, sizeof cmd, "docker -H %s cp %s %s:/workspace/cpnew.bin", cfg_host,
                 src, ref);
        run_cmd("sync");
        n_cp[i] = run_cmd(cmd);
        snprintf(cmd, sizeof cmd, "docker -H %s cp %s %s:/workspace/cp.bin", cfg_host,
                 src, ref);
        run_cmd("sync");
        w_cp[i] = run_cmd(cmd);

        unlink(dst);
        int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        struct sbx_sink out = SBX_SINK_INIT(&fd, fd_write);
        reset_peak();
        rss0 = proc_kib("VmRSS");
        t0 = bench_now();
        if ((rc = ops->read_file(sb, &c, "big.bin", &out)))
            bench_die("bench_stream", "read_file", rc, &c);
        r_sbx[i] = bench_now() - t0;
        long g = proc_kib("VmHWM") - rss0;
        if (g > read_growth)
            read_growth = g;
        close(fd);
        if (file_size(dst) != (off_t)bytes) {
            fprintf(stderr, "bench_stream: read_file gave %lld bytes\n",
                    (long long)file_size(dst));
            return 1;
        }
        unlink(dst);
        snprintf(cmd, sizeof cmd, "docker -H %s cp %s:/workspace/cp.bin %s", cfg_host, ref,
                 dst);
        r_cp[i] = run_cmd(cmd);
        if (file_size(dst) != (off_t)bytes) {
            fprintf(stderr, "bench_stream: docker cp gave %lld bytes\n",
                    (long long)file_size(dst));
            return 1;
        }
    }
    double ws = bench_median(w_sbx, (size_t)runs), wc = bench_median(w_cp, (size_t)runs);
    double ns = bench_median(n_sbx, (size_t)runs), nc = bench_median(n_cp, (size_t)runs);
    double rs = bench_median(r_sbx, (size_t)runs), rcp = bench_median(r_cp, (size_t)runs);
    double mb = (double)mib;
    printf("bench_stream: %ld MiB, %d runs, daemon %s, image %s\n", mib, runs, cfg_host,
           cfg_image);
    printf("exec stdout vs cat to /dev/null in the container: %.2f s (%.0f MiB/s) vs "
           "%.2f s (%.0f MiB/s): %.2fx\n",
           exec_secs, (double)mib / exec_secs, cat_secs, (double)mib / cat_secs,
           cat_secs / exec_secs);
    printf("exec stdout: %.2f s (%.0f MiB/s), peak RSS growth %ld KiB\n", exec_secs,
           mb / exec_secs, exec_growth);
    printf("file read:   peak RSS growth %ld KiB (largest of %d runs)\n", read_growth,
           runs);
    printf("file write:  peak RSS growth %ld KiB (largest of %d runs)\n", write_growth,
           runs);
    printf("write (new file): sbx %.2f s (%.0f MiB/s), docker cp %.2f s (%.0f MiB/s): "
           "sbx throughput %.2fx docker cp\n",
           ns, mb / ns, nc, mb / nc, nc / ns);
    printf("write (replace):  sbx %.2f s (%.0f MiB/s), docker cp %.2f s (%.0f MiB/s): "
           "sbx throughput %.2fx docker cp\n",
           ws, mb / ws, wc, mb / wc, wc / ws);
    printf("read:  sbx %.2f s (%.0f MiB/s), docker cp %.2f s (%.0f MiB/s): sbx "
           "throughput %.2fx docker cp\n",
           rs, mb / rs, rcp, mb / rcp, rcp / rs);

    ops->release(sb);
    if ((rc = ops->destroy(st, &c, TEST_DESTROY_ARGS("bench-stream", ref))))
        bench_die("bench_stream", "destroy", rc, &c);
    ops->fini(st);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run_cmd(cmd);
    free(w_sbx);
    free(w_cp);
    free(n_sbx);
    free(n_cp);
    free(r_sbx);
    free(r_cp);
    return 0;
}
