/*
 * bench_config_load.c - loading a provider section of N keys (and a list of
 * N items) with sbxh_config_open (what opening a context runs), against a
 * bare libyaml event parse of the same file, side by side, for a small and a
 * large N.
 *
 *   bench_config_load [--small N] [--large N] [--rounds N]
 *
 * The loader is linear when its cost per libyaml event stays flat: the
 * target is that the ratio (sbx load / libyaml parse) at the large N is at
 * most 1.5 times the ratio at the small N. A quadratic loader (the one that
 * made 160 000 keys take 30 s) fails by orders of magnitude. N is capped by
 * SBX_CONFIG_ENTRIES_MAX, since a larger section is refused.
 * Exit status: 0 when the target is met, 1 otherwise, 2 on setup errors.
 */
#include "api/ctx.h"

#include <yaml.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TARGET_GROWTH 1.5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_file(const char *path, long n, int list)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "providers:\n  local:\n%s", list ? "    items:\n" : "");
    for (long i = 0; i < n; i++)
        fprintf(f, list ? "      - value-%ld\n" : "    key%ld: value-%ld\n", i, i);
    return fclose(f);
}

static double time_libyaml(const char *path)
{
    double t0 = now_s();
    FILE *f = fopen(path, "r");
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    yaml_event_t ev;
    int done = 0;
    while (!done && yaml_parser_parse(&p, &ev)) {
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    fclose(f);
    return now_s() - t0;
}

static double time_sbx(const char *path)
{
    double t0 = now_s();
    struct sbx_config *cfg = NULL;
    sbx_error err;
    if (sbxh_config_open(path, NULL, &cfg, &err) != SBX_OK) {
        fprintf(stderr, "bench_config_load: %s\n", err.message);
        exit(2);
    }
    sbxh_config_free(cfg);
    return now_s() - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over rounds of (sbx time / libyaml time) for one file. */
static double ratio(const char *path, int rounds, double *sbx_s, double *yaml_s)
{
    double r[64], s[64], y[64];
    for (int i = 0; i < rounds; i++) {
        y[i] = time_libyaml(path);
        s[i] = time_sbx(path);
        r[i] = s[i] / y[i];
    }
    qsort(r, (size_t)rounds, sizeof *r, cmp);
    qsort(s, (size_t)rounds, sizeof *s, cmp);
    qsort(y, (size_t)rounds, sizeof *y, cmp);
    *sbx_s = s[rounds / 2];
    *yaml_s = y[rounds / 2];
    return r[rounds / 2];
}

int main(int argc, char **argv)
{
    long small = 256, large = SBX_CONFIG_ENTRIES_MAX - 1;
    int rounds = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--small"))
            small = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--large"))
            large = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
    }
    if (rounds < 1 || rounds > 64 || small < 1 || large <= small ||
        large >= SBX_CONFIG_ENTRIES_MAX) {
        fprintf(stderr, "usage: bench_config_load [--small N] [--large N < %d] "
                        "[--rounds 1..64]\n", SBX_CONFIG_ENTRIES_MAX);
        return 2;
    }
    char path[] = "/tmp/sbx-bench-config-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 2;
    close(fd);
    int ok = 1;
    printf("%-6s %7s %12s %12s %8s\n", "shape", "N", "sbx_ms", "libyaml_ms", "ratio");
    for (int list = 0; list < 2; list++) {
        double rs, rl, ss, ys, sl, yl;
        if (write_file(path, small, list) != 0)
            return 2;
        rs = ratio(path, rounds, &ss, &ys);
        if (write_file(path, large, list) != 0)
            return 2;
        rl = ratio(path, rounds, &sl, &yl);
        const char *shape = list ? "list" : "keys";
        printf("%-6s %7ld %12.3f %12.3f %8.2f\n", shape, small, ss * 1e3, ys * 1e3, rs);
        printf("%-6s %7ld %12.3f %12.3f %8.2f\n", shape, large, sl * 1e3, yl * 1e3, rl);
        double growth = rl / rs;
        printf("%-6s growth of the ratio from N=%ld to N=%ld: %.2f (target <= %.1f)\n",
               shape, small, large, growth, TARGET_GROWTH);
        ok &= growth <= TARGET_GROWTH;
    }
    unlink(path);
    return ok ? 0 : 1;
}
