/*
 * cli_progress.c - progress of long steps (image pulls, package
 * installation, snapshots, restores, memory loads) on stderr.
 *
 * On a terminal one line is redrawn in place ("\r" and erase to the end of
 * the line), at most ten times a second (a new step, and the first line of
 * detail of each, at once), and erased when the step ends, so nothing of it
 * stays in the scrollback. When stderr is not a terminal
 * nothing is printed, unless --progress=json asks for one JSON object per
 * line (throttled the same way; every step's last report is kept).
 * --quiet (or --progress=none) prints nothing. The reports come through
 * the run token's callback (sbx_cancel_set_progress), possibly from a
 * helper thread of the call: the mutex keeps lines whole.
 */
#include "cli.h"
#include "cmd_proc.h"

#include <json-c/json.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define THROTTLE_MS 100

static int mode = CLI_PROGRESS_AUTO;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int drawn;          /* a line is on the terminal */
static long long last_ms;  /* of the last line shown */
/* what was last shown: a new step (another `what`, another step number)
 * and its first line of detail are always shown, only the rest is
 * throttled */
static char last_what[128];
static uint64_t last_step = UINT64_MAX;
static bool last_had_detail;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_progress_set_mode(const char *arg)
{
    static const char *const names[] = {"auto", "human", "json", "none"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(arg, names[i])) {
            mode = i;
            return 0;
        }
    return -1;
}

/* "12.3 MiB" into buf. */
static void human_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
}

static void amount(const struct sbx_progress *p, uint64_t n, char *buf, size_t cap)
{
    if (p->unit && !strcmp(p->unit, "bytes"))
        human_bytes(n, buf, cap);
    else
        snprintf(buf, cap, "%llu", (unsigned long long)n);
}

static void draw_line(const struct sbx_progress *p)
{
    char done[32], total[32], line[512];
    amount(p, p->done, done, sizeof done);
    int n;
    if (p->total) {
        amount(p, p->total, total, sizeof total);
        n = snprintf(line, sizeof line, "sbx: %s: %s of %s (%d%%)", p->what, done, total,
                     (int)(p->done >= p->total ? 100 : p->done * 100 / p->total));
    } else
        n = snprintf(line, sizeof line, "sbx: %s: %s", p->what, done);
    if (p->detail && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " - %s", p->detail);
    /* one terminal line: cut at the width, and no control characters */
    struct winsize ws;
    size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
    size_t len = strlen(line);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = ' ';
    if (len >= width)
        line[width - 1] = '\0';
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
    drawn = 1;
}

static void json_line(const struct sbx_progress *p)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "progress", json_object_new_string(p->what));
    json_object_object_add(o, "unit", json_object_new_string(p->unit ? p->unit : ""));
    json_object_object_add(o, "done", json_object_new_int64((int64_t)p->done));
    json_object_object_add(o, "total", json_object_new_int64((int64_t)p->total));
    if (p->detail)
        /* the detail may be a package manager's output: bytes that are
         * not UTF-8 become U+FFFD, so each line stays valid JSON */
        json_object_object_add(o, "detail", cli_json_text(p->detail, strlen(p->detail)));
    json_object_object_add(o, "finished", json_object_new_boolean(p->finished));
    fprintf(stderr, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    fflush(stderr);
    json_object_put(o);
}

static void on_progress(void *ud, const struct sbx_progress *p)
{
    (void)ud;
    pthread_mutex_lock(&lock);
    long long t = now_ms();
    bool steps = p->unit && !strcmp(p->unit, "steps");
    bool new_step = strncmp(p->what, last_what, sizeof last_what - 1) != 0 ||
                    (steps && p->done != last_step);
    bool first_detail = p->detail && (new_step || !last_had_detail);
    if (p->finished || new_step || first_detail || t - last_ms >= THROTTLE_MS) {
        last_ms = t;
        if (new_step) {
            snprintf(last_what, sizeof last_what, "%s", p->what);
            last_step = p->done;
            last_had_detail = false;
        }
        if (p->detail)
            last_had_detail = true;
        if (mode == CLI_PROGRESS_JSON)
            json_line(p);
        else if (p->finished) {
            if (drawn)
                fputs("\r\033[K", stderr);
            drawn = 0;
        } else
            draw_line(p);
    }
    pthread_mutex_unlock(&lock);
}

void cli_progress_attach(sbx_cancel *c)
{
    int m = mode;
    if (m == CLI_PROGRESS_AUTO)
        m = isatty(STDERR_FILENO) ? CLI_PROGRESS_HUMAN : CLI_PROGRESS_NONE;
    mode = m;
    if (m != CLI_PROGRESS_NONE)
        sbx_cancel_set_progress(c, on_progress, NULL);
}

void cli_progress_end(void)
{
    pthread_mutex_lock(&lock);
    if (drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    drawn = 0;
    pthread_mutex_unlock(&lock);
}
