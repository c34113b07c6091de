/*
 * bench_pty.c - processes on a pseudo-terminal through libsbx against the
 * same through a PTY this program opens itself (openpty + fork), in the
 * same run:
 *
 *   keystroke   write one byte, read its echo; `cat` on a raw terminal
 *               echoes it (the same program and terminal mode both ways).
 *               Median round trip, sbx / raw. Targets: local <= 1.5x,
 *               docker <= 3x. With a read pending (as exec -it), the echo
 *               is timed where the reader thread gets it (where exec -it
 *               writes it to the terminal) and, for reference, where the
 *               writer thread learns of it through a pipe.
 *   throughput  256 MiB of terminal output (bench_pty_writer, pty_writer.c:
 *               the same static binary on both sides, copied into the
 *               sandbox, 128 KiB writes like `cat`; --writer head: each
 *               side's own `head -c N /dev/zero`) on a raw terminal, read
 *               to the end, sbx / raw bytes per second
 *               (target >= 0.5x), and this process's peak RSS growth while
 *               sbx streams it (target <= 8 MiB). Bytes the replay buffer
 *               dropped because we read slower than the command wrote are
 *               counted and printed (they are not part of the rate), and
 *               so are the sbx_proc_read calls (each one round trip to the
 *               supervisor) and this process's CPU time per MiB read.
 *
 * Usage: bench_pty keystroke|throughput [--provider local|docker]
 *                  [--rounds N] [--bytes N] [--writer same|head] [--chunk N]
 * docker needs SBX_TEST_DOCKER_HOST (and SBX_TEST_DOCKER_IMAGE, default
 * sbx-test:busybox); without it the docker run prints "skipped" and exits 0.
 * Exits 0 after printing; ratios are for docs/PERFORMANCE.md, not asserted.
 */
#include <sbx/sbx.h>

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef BENCH_PROVIDER_DIR
#error "BENCH_PROVIDER_DIR must name the build-tree provider directory"
#endif

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_pty: %s: %s\n", what, msg ? msg : strerror(errno));
    exit(2);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* VmHWM / VmRSS of this process in KiB. */
static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return v;
}

/* ---- the baseline: a PTY of our own -------------------------------------- */

/* fork sh -c script on a new raw PTY; *master is ours. */
static pid_t raw_pty_spawn(const char *script, int *master)
{
    struct termios raw;
    memset(&raw, 0, sizeof raw);
    cfmakeraw(&raw);
    struct winsize ws = {24, 80, 0, 0};
    pid_t pid = forkpty(master, NULL, &raw, &ws);
    if (pid < 0)
        die("forkpty", NULL);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void read_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            die("read from the PTY", r == 0 ? "end of file" : NULL);
        }
        got += (size_t)r;
    }
}

static double raw_keystroke(unsigned rounds)
{
    int m;
    pid_t pid = raw_pty_spawn("exec cat", &m);
    double *v = calloc(rounds, sizeof *v);
    char c;
    /* a first round trip: cat is up */
    if (write(m, "x", 1) != 1)
        die("write", NULL);
    read_exact(m, &c, 1);
    for (unsigned i = 0; i < rounds; i++) {
        double t0 = now();
        if (write(m, "a", 1) != 1)
            die("write", NULL);
        read_exact(m, &c, 1);
        v[i] = now() - t0;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(m);
    double med = median(v, rounds);
    free(v);
    return med;
}

/* The throughput run's writer (--writer): "same", the static pty_writer
 * (BENCH_PTY_WRITER) run on both sides, copied into the sandbox; "head",
 * `head -c N /dev/zero` of each side's own system (on docker the
 * container's busybox head: another program than the host's). */
static int writer_same;
static size_t writer_chunk = (size_t)128 << 10;
#define WRITER_NAME "bench-pty-writer" /* in the sandbox's workspace */

static void writer_script(char *buf, size_t cap, uint64_t bytes, int raw)
{
#ifdef BENCH_PTY_WRITER
    if (writer_same) {
        snprintf(buf, cap, "%sexec %s %llu %zu", raw ? "" : "stty raw -echo; ",
                 raw ? BENCH_PTY_WRITER : "./" WRITER_NAME, (unsigned long long)bytes,
                 writer_chunk);
        return;
    }
#endif
    snprintf(buf, cap, "%sexec head -c %llu /dev/zero", raw ? "" : "stty raw -echo; ",
             (unsigned long long)bytes);
}

static double raw_throughput(uint64_t bytes)
{
    char script[512];
    writer_script(script, sizeof script, bytes, 1);
    int m;
    double t0 = now();
    pid_t pid = raw_pty_spawn(script, &m);
    static char buf[1 << 16];
    uint64_t got = 0;
    for (;;) {
        ssize_t r = read(m, buf, sizeof buf);
        if (r > 0) {
            got += (uint64_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        break; /* EIO once the command closed the terminal */
    }
    double t = now() - t0;
    waitpid(pid, NULL, 0);
    close(m);
    if (got != bytes)
        fprintf(stderr, "bench_pty: raw PTY delivered %llu of %llu bytes\n",
                (unsigned long long)got, (unsigned long long)bytes);
    return (double)got / t;
}

/* ---- through sbx --------------------------------------------------------- */

struct env {
    char dir[64];
    sbx_ctx *ctx;
    sbx_provider *p;
    sbx_handle *h;
    const char *provider;
};

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static bool env_open(struct env *e, const char *provider)
{
    memset(e, 0, sizeof *e);
    e->provider = provider;
    snprintf(e->dir, sizeof e->dir, "/tmp/sbx-bench-pty-XXXXXX");
    if (!mkdtemp(e->dir))
        die("mkdtemp", NULL);
    char config[128];
    snprintf(config, sizeof config, "%s/sbx.yaml", e->dir);
    FILE *f = fopen(config, "w");
    if (!f)
        die(config, NULL);
    if (!strcmp(provider, "docker")) {
        const char *host = getenv("SBX_TEST_DOCKER_HOST");
        const char *img = getenv("SBX_TEST_DOCKER_IMAGE");
        if (!host || !*host) {
            fclose(f);
            nftw(e->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
            return false;
        }
        fprintf(f,
                "default_provider: docker\nproviders:\n  docker:\n    host: \"%s\"\n"
                "    image: \"%s\"\n    resource_dir: \"%s/res\"\n",
                host, img && *img ? img : "sbx-test:busybox", e->dir);
    } else {
        fprintf(f, "default_provider: local\nproviders:\n  local:\n    root: %s/ws\n",
                e->dir);
    }
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = config;
    o.plugin_path = BENCH_PROVIDER_DIR;
    o.provider = provider;
    o.ignore_environment = true;
    sbx_error err;
    if (sbx_open(&o, &e->ctx, &err) != SBX_OK ||
        sbx_provider_lookup(e->ctx, provider, &e->p, &err) != SBX_OK)
        die("open", err.message);
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    if (sbx_create(e->p, "bench-pty", &co, NULL, &e->h, &err) != SBX_OK)
        die("sbx_create", err.message);
    return true;
}

static void env_close(struct env *e)
{
    sbx_error err;
    char *ref = strdup(sbx_handle_ref(e->h));
    sbx_release(e->h);
    if (sbx_destroy(e->p, "bench-pty", ref, NULL, &err) != SBX_OK)
        fprintf(stderr, "bench_pty: destroy: %s\n", err.message);
    free(ref);
    sbx_close(e->ctx);
    nftw(e->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void start(struct env *e, const char *script, char id[SBX_PROC_ID_MAX])
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.flags = SBX_PROC_PTY;
    spec.argv = argv;
    sbx_error err;
    if (sbx_proc_start(e->h, &spec, id, NULL, &err) != SBX_OK)
        die("sbx_proc_start", err.message);
}

struct counter {
    uint64_t bytes;
};

static int count(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    ((struct counter *)ctx)->bytes += len;
    return 0;
}

static uint64_t reads_made; /* sbx_proc_read calls */

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Read until `want` more bytes came (or the end); returns the read result. */
static void read_some(struct env *e, const char *id, uint64_t *cursor, uint64_t want,
                      uint64_t *lost, int *eof)
{
    struct counter c = {0};
    struct sbx_sink sink = SBX_SINK_INIT(&c, count);
    while (c.bytes < want) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = 5000;
        a.out_cursor = *cursor;
        a.max_bytes = (uint64_t)1 << 20;
        a.out = &sink;
        struct sbx_proc_read_result r;
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        sbx_error err;
        if (sbx_proc_read(e->h, id, &a, &r, NULL, &err) != SBX_OK)
            die("sbx_proc_read", err.message);
        reads_made++;
        *cursor = r.out_cursor;
        if (lost)
            *lost += r.out_lost;
        if (r.eof) {
            if (eof)
                *eof = 1;
            return;
        }
    }
}

static double sbx_keystroke(struct env *e, unsigned rounds)
{
    char id[SBX_PROC_ID_MAX];
    start(e, "stty raw -echo; echo ready; exec cat", id);
    uint64_t cursor = 0;
    read_some(e, id, &cursor, 6, NULL, NULL); /* "ready\r\n" begins */
    sbx_error err;
    /* drain the rest of the line */
    double t_end = now() + 0.2;
    while (now() < t_end) {
        struct counter c = {0};
        struct sbx_sink sink = SBX_SINK_INIT(&c, count);
        struct sbx_proc_read_args a = {sizeof a, 50, cursor, 0, 0, &sink, NULL};
        struct sbx_proc_read_result r;
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        if (sbx_proc_read(e->h, id, &a, &r, NULL, &err) != SBX_OK)
            die("sbx_proc_read", err.message);
        cursor = r.out_cursor;
    }
    double *v = calloc(rounds, sizeof *v);
    for (unsigned i = 0; i < rounds; i++) {
        double t0 = now();
        if (sbx_proc_write(e->h, id, "a", 1, 0, NULL, &err) != SBX_OK)
            die("sbx_proc_write", err.message);
        read_some(e, id, &cursor, 1, NULL, NULL);
        v[i] = now() - t0;
    }
    sbx_proc_signal(e->h, id, SIGKILL, NULL, &err);
    double med = median(v, rounds);
    free(v);
    return med;
}

/* As `sbx exec -it` does it: a reader thread keeps a proc_read pending, so
 * the echo is pushed to it the moment it is written; the writer only
 * writes. The round trip is write -> echo arrival at the reader. */
struct pending {
    struct env *e;
    const char *id;
    uint64_t cursor;
    int notify[2];
    volatile int stop;
    double arrived; /* when the reader got the last echo (before notifying) */
};

static int notify_write(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    struct pending *p = ctx;
    p->arrived = now(); /* read by the writer after the pipe: ordered by it */
    for (size_t i = 0; i < len; i++)
        if (write(p->notify[1], "!", 1) != 1)
            return SBX_E_IO;
    return 0;
}

static void *pending_reader(void *arg)
{
    struct pending *p = arg;
    struct sbx_sink sink = SBX_SINK_INIT(p, notify_write);
    while (!p->stop) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = 200;
        a.out_cursor = p->cursor;
        a.out = &sink;
        struct sbx_proc_read_result r;
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        sbx_error err;
        if (sbx_proc_read(p->e->h, p->id, &a, &r, NULL, &err) != SBX_OK || r.eof)
            break;
        p->cursor = r.out_cursor;
    }
    return NULL;
}

static double write_median;  /* of the proc_write calls alone, pending mode */
static double writer_median; /* the echo seen by the writer thread, pending mode */

static double sbx_keystroke_pending(struct env *e, unsigned rounds)
{
    char id[SBX_PROC_ID_MAX];
    start(e, "stty raw -echo; exec cat", id);
    struct pending p = {e, id, 0, {-1, -1}, 0, 0};
    if (pipe(p.notify) != 0)
        die("pipe", NULL);
    usleep(300 * 1000); /* stty has run */
    pthread_t tid;
    if (pthread_create(&tid, NULL, pending_reader, &p) != 0)
        die("pthread_create", "failed");
    sbx_error err;
    char c;
    double *v = calloc(rounds, sizeof *v), *w = calloc(rounds, sizeof *w),
           *x = calloc(rounds, sizeof *x);
    for (unsigned i = 0; i <= rounds; i++) {
        double t0 = now();
        if (sbx_proc_write(e->h, id, "a", 1, 0, NULL, &err) != SBX_OK)
            die("sbx_proc_write", err.message);
        double t1 = now();
        read_exact(p.notify[0], &c, 1);
        if (i > 0) { /* the first one warms up */
            v[i - 1] = p.arrived - t0; /* the echo at the reader, as exec -it shows it */
            x[i - 1] = now() - t0;     /* ... and passed on to this thread */
            w[i - 1] = t1 - t0;
        }
    }
    write_median = median(w, rounds);
    writer_median = median(x, rounds);
    free(w);
    free(x);
    p.stop = 1;
    sbx_proc_signal(e->h, id, SIGKILL, NULL, &err);
    pthread_join(tid, NULL);
    close(p.notify[0]);
    close(p.notify[1]);
    double med = median(v, rounds);
    free(v);
    return med;
}

/* Copy the static writer into the sandbox's workspace (executable). */
static void writer_upload(struct env *e)
{
#ifdef BENCH_PTY_WRITER
    FILE *f = fopen(BENCH_PTY_WRITER, "rb");
    if (!f)
        die(BENCH_PTY_WRITER, NULL);
    static char bin[8 << 20];
    size_t n = fread(bin, 1, sizeof bin, f);
    fclose(f);
    struct sbx_memory_source m = {bin, n, 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    if (sbx_write(e->h, WRITER_NAME, &src, 0755, NULL, &err) != SBX_OK)
        die("sbx_write of the writer", err.message);
#else
    (void)e;
#endif
}

static double sbx_throughput(struct env *e, uint64_t bytes, long *rss_growth_kib,
                             uint64_t *lost_out, double *kib_per_read, double *cpu_ms_per_mib)
{
    char script[512];
    writer_script(script, sizeof script, bytes, 0);
    long hwm0 = status_kib("VmHWM"), rss0 = status_kib("VmRSS");
    char id[SBX_PROC_ID_MAX];
    double t0 = now(), c0 = cpu_s();
    start(e, script, id);
    uint64_t cursor = 0, lost = 0, r0 = reads_made;
    int eof = 0;
    while (!eof)
        read_some(e, id, &cursor, UINT64_MAX, &lost, &eof);
    double t = now() - t0;
    double mib = (double)(cursor - lost) / 1048576.0;
    *kib_per_read = (double)(cursor - lost) / 1024.0 / (double)(reads_made - r0);
    *cpu_ms_per_mib = mib > 0 ? (cpu_s() - c0) * 1e3 / mib : 0;
    long hwm1 = status_kib("VmHWM");
    /* growth of the peak over what we had before (the peak before may be
     * higher than the resident set then: compare with the larger) */
    long base = hwm0 > rss0 ? hwm0 : rss0;
    *rss_growth_kib = hwm1 > base ? hwm1 - base : 0;
    *lost_out = lost;
    if (cursor != bytes)
        fprintf(stderr, "bench_pty: sbx stream ended at cursor %llu of %llu\n",
                (unsigned long long)cursor, (unsigned long long)bytes);
    return (double)(cursor - lost) / t;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *provider = "local";
    unsigned rounds = 2000;
    uint64_t bytes = (uint64_t)256 << 20;
#ifdef BENCH_PTY_WRITER
    writer_same = 1;
#endif
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--provider") && i + 1 < argc)
            provider = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--writer") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "same") || !strcmp(argv[i + 1], "head")))
            writer_same = !strcmp(argv[++i], "same");
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            writer_chunk = strtoul(argv[++i], NULL, 10);
        else
            die("usage", "bench_pty keystroke|throughput [--provider local|docker] "
                         "[--rounds N] [--bytes N] [--writer same|head] [--chunk N]");
    }
#ifndef BENCH_PTY_WRITER
    if (writer_same)
        die("--writer same", "this build has no static writer (bench/proc/CMakeLists.txt)");
#endif
    if (rounds == 0 || bytes == 0 || writer_chunk == 0 || writer_chunk > (1u << 20) ||
        (strcmp(mode, "keystroke") && strcmp(mode, "throughput")))
        die("usage", "bench_pty keystroke|throughput [--provider local|docker] "
                     "[--rounds N] [--bytes N] [--writer same|head] [--chunk N]");
    signal(SIGPIPE, SIG_IGN);
    struct env e;
    if (!env_open(&e, provider)) {
        printf("%s %s: skipped (SBX_TEST_DOCKER_HOST is not set)\n", mode, provider);
        return 0;
    }
    if (!strcmp(mode, "keystroke")) {
        /* Interleaved blocks, so that the load of a shared machine falls on
         * the baseline and sbx alike; the medians of the blocks' medians. */
        enum { BLOCKS = 10 };
        double raw[BLOCKS], ser[BLOCKS], pend[BLOCKS], wr[BLOCKS], pw[BLOCKS];
        double rp[BLOCKS], rs[BLOCKS], rw[BLOCKS];
        unsigned per = rounds / BLOCKS ? rounds / BLOCKS : 1;
        for (int b = 0; b < BLOCKS; b++) {
            raw[b] = raw_keystroke(per);
            pend[b] = sbx_keystroke_pending(&e, per);
            wr[b] = write_median;
            pw[b] = writer_median;
            ser[b] = sbx_keystroke(&e, per);
            /* each block's ratios against its own baseline */
            rp[b] = pend[b] / raw[b];
            rw[b] = pw[b] / raw[b];
            rs[b] = ser[b] / raw[b];
        }
        double mr = median(raw, BLOCKS), mp = median(pend, BLOCKS), ms = median(ser, BLOCKS);
        double mw = median(pw, BLOCKS);
        printf("keystroke round trip, %s, %d interleaved blocks of %u: raw PTY %.1f us; "
               "sbx with a read pending (as exec -it) %.1f us at the reader, ratio %.2f "
               "(block ratios' median %.2f), %.1f us at the writer thread, ratio %.2f "
               "(%.2f); its proc_write call %.1f us; sbx write then read %.1f us, ratio %.2f "
               "(%.2f)\n",
               provider, BLOCKS, per, mr * 1e6, mp * 1e6, mp / mr, median(rp, BLOCKS),
               mw * 1e6, mw / mr, median(rw, BLOCKS), median(wr, BLOCKS) * 1e6, ms * 1e6,
               ms / mr, median(rs, BLOCKS));
    } else {
        /* three interleaved pairs; the median pair by ratio is printed */
        enum { PAIRS = 3 };
        double raw[PAIRS], sbx[PAIRS], ratio[PAIRS], sorted[PAIRS];
        long growth[PAIRS];
        uint64_t lost[PAIRS];
        double kpr[PAIRS], cpu[PAIRS];
        if (writer_same)
            writer_upload(&e);
        for (int i = 0; i < PAIRS; i++) {
            raw[i] = raw_throughput(bytes);
            sbx[i] = sbx_throughput(&e, bytes, &growth[i], &lost[i], &kpr[i], &cpu[i]);
            ratio[i] = sorted[i] = sbx[i] / raw[i];
        }
        double mid = median(sorted, PAIRS);
        long max_growth = 0;
        for (int i = 0; i < PAIRS; i++) {
            if (growth[i] > max_growth)
                max_growth = growth[i];
            printf("  pair %d: raw PTY %.0f MiB/s, sbx %.0f MiB/s, ratio %.2f, dropped %llu; "
                   "%.1f KiB per sbx_proc_read, reader CPU %.2f ms per MiB\n",
                   i + 1, raw[i] / 1048576.0, sbx[i] / 1048576.0, ratio[i],
                   (unsigned long long)lost[i], kpr[i], cpu[i]);
        }
        char wdesc[64];
        if (writer_same)
            snprintf(wdesc, sizeof wdesc, "pty_writer, %zu-byte writes", writer_chunk);
        else
            snprintf(wdesc, sizeof wdesc, "each side's head -c");
        printf("PTY output %llu MiB (%s), %s, %d interleaved pairs: median ratio %.2f; peak "
               "RSS growth at most %.1f MiB\n",
               (unsigned long long)(bytes >> 20), wdesc, provider, PAIRS, mid,
               (double)max_growth / 1024.0);
    }
    env_close(&e);
    return 0;
}
