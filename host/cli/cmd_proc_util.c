/*
 * cmd_proc_util.c - helpers of the process, file-operation and port
 * commands: the existing session they act on, signal names, cursors and
 * sizes, JSON text and buffers, exit statuses, and printing a yield.
 */
#include "cmd_proc.h"

#include "utf8.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int cli_session_open_existing(const struct cli_globals *g, const char *key,
                              struct cli_session *s)
{
    memset(s, 0, sizeof *s);
    if (cli_sessions_open(g, NULL, &s->ctx, &s->m) != SBX_OK)
        return cli_failure_status();
    sbx_error err;
    int rc = sbx_session_attach(s->m, key, cli_run_cancel(), &s->h, &err);
    if (rc != SBX_OK) {
        int status = cli_session_failed(rc, &err);
        cli_session_close(s);
        return status;
    }
    return CLI_EXIT_OK;
}

void cli_session_close(struct cli_session *s)
{
    sbx_release(s->h);
    cli_sessions_close(s->ctx, s->m);
    memset(s, 0, sizeof *s);
}

/* Linux signal numbers (the ABI's numbering, whatever the host's). */
static const struct {
    int no;
    const char *name;
} signals[] = {
    {1, "HUP"},     {2, "INT"},     {3, "QUIT"},   {4, "ILL"},     {5, "TRAP"},
    {6, "ABRT"},    {7, "BUS"},     {8, "FPE"},    {9, "KILL"},    {10, "USR1"},
    {11, "SEGV"},   {12, "USR2"},   {13, "PIPE"},  {14, "ALRM"},   {15, "TERM"},
    {16, "STKFLT"}, {17, "CHLD"},   {18, "CONT"},  {19, "STOP"},   {20, "TSTP"},
    {21, "TTIN"},   {22, "TTOU"},   {23, "URG"},   {24, "XCPU"},   {25, "XFSZ"},
    {26, "VTALRM"}, {27, "PROF"},   {28, "WINCH"}, {29, "IO"},     {30, "PWR"},
    {31, "SYS"},
};

int cli_signal_parse(const char *text)
{
    if (text[0] >= '0' && text[0] <= '9') {
        char *end;
        errno = 0;
        long v = strtol(text, &end, 10);
        return *end || errno || v < 1 || v > 64 ? 0 : (int)v;
    }
    const char *name = strncasecmp(text, "SIG", 3) ? text : text + 3;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (!strcasecmp(name, signals[i].name))
            return signals[i].no;
    return 0;
}

const char *cli_signal_name(int signo)
{
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (signals[i].no == signo)
            return signals[i].name;
    return NULL;
}

static bool parse_u64(const char *p, const char **end, uint64_t *out)
{
    if (*p < '0' || *p > '9')
        return false;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *end = p;
    *out = v;
    return true;
}

bool cli_cursor_parse(const char *text, uint64_t *out, uint64_t *err)
{
    const char *p;
    if (!parse_u64(text, &p, out))
        return false;
    *err = 0;
    if (*p == ',' && !parse_u64(p + 1, &p, err))
        return false;
    return *p == '\0';
}

bool cli_ms_parse(const char *text, uint32_t *out)
{
    const char *p;
    uint64_t v;
    if (!parse_u64(text, &p, &v) || *p || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

bool cli_size_parse(const char *text, uint64_t max, uint64_t *out)
{
    const char *p;
    uint64_t v;
    if (!parse_u64(text, &p, &v))
        return false;
    unsigned shift = 0;
    switch (tolower((unsigned char)*p)) {
    case '\0': break;
    case 'k': shift = 10; p++; break;
    case 'm': shift = 20; p++; break;
    case 'g': shift = 30; p++; break;
    default: return false;
    }
    if (*p || v == 0 || v > (max >> shift))
        return false;
    *out = v << shift;
    return true;
}

/* Length of the valid UTF-8 sequence at p[0..left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
    size_t n = p[0] < 0x80 ? 1 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
    return n <= left && sbxs_utf8_valid(p, n) ? n : 0;
}

json_object *cli_json_text(const void *buf, size_t len)
{
    const unsigned char *b = buf;
    size_t i = 0, n;
    while (i < len && (n = utf8_len(b + i, len - i)) != 0)
        i += n;
    if (i == len)
        return json_object_new_string_len(len ? buf : "", (int)len);
    char *lossy = malloc(3 * len + 1);
    if (!lossy)
        return NULL;
    size_t w = 0;
    for (i = 0; i < len; i += n) {
        n = utf8_len(b + i, len - i);
        if (n == 0) {
            memcpy(lossy + w, "\xef\xbf\xbd", 3); /* U+FFFD */
            w += 3;
            n = 1;
        } else {
            memcpy(lossy + w, b + i, n);
            w += n;
        }
    }
    json_object *o = json_object_new_string_len(lossy, (int)w);
    free(lossy);
    return o;
}

void cli_json_print(json_object *o)
{
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                               JSON_C_TO_STRING_SPACED |
                                               JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static int buffer_write(void *ctx, const void *buf, size_t len)
{
    struct cli_buffer *b = ctx;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->failed = true;
            sbx_stream_error("out of memory");
            return SBX_E_NOMEM;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, buf, len);
    b->len += len;
    return SBX_OK;
}

struct sbx_sink cli_buffer_sink(struct cli_buffer *b)
{
    struct sbx_sink s = SBX_SINK_INIT(b, buffer_write);
    return s;
}

int cli_proc_exit_status(int exit_code, int term_signal, int timed_out)
{
    if (timed_out)
        return CLI_EXIT_TIMEOUT;
    if (term_signal > 0)
        return CLI_EXIT_SIGNAL + term_signal;
    return exit_code;
}

int cli_yield_report(const struct sbx_proc_yield_result *r, bool json,
                     const struct cli_buffer *out, const struct cli_buffer *err)
{
    bool ended = r->state == SBX_PROC_EXITED;
    int status = ended ? cli_proc_exit_status(r->exit_code, r->term_signal, r->timed_out)
                       : CLI_EXIT_OK;
    if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_string(r->id));
        json_object_object_add(o, "running", json_object_new_boolean(!ended));
        json_object_object_add(o, "exit_code",
                               ended && r->term_signal == 0
                                   ? json_object_new_int(r->exit_code)
                                   : NULL);
        json_object_object_add(o, "signal",
                               ended && r->term_signal > 0
                                   ? json_object_new_int(r->term_signal)
                                   : NULL);
        json_object_object_add(o, "timed_out", json_object_new_boolean(r->timed_out));
        json_object_object_add(o, "stdout", cli_json_text(out->data, out->len));
        json_object_object_add(o, "stderr", cli_json_text(err->data, err->len));
        json_object_object_add(o, "stdout_cursor", json_object_new_uint64(r->out_cursor));
        json_object_object_add(o, "stderr_cursor", json_object_new_uint64(r->err_cursor));
        json_object_object_add(o, "stdout_lost", json_object_new_uint64(r->out_lost));
        json_object_object_add(o, "stderr_lost", json_object_new_uint64(r->err_lost));
        json_object_object_add(o, "truncated", json_object_new_boolean(r->truncated));
        json_object_object_add(o, "eof", json_object_new_boolean(r->eof));
        cli_json_print(o);
        return status;
    }
    if (r->out_lost || r->err_lost)
        cli_error("%llu bytes of stdout and %llu of stderr were lost (the replay "
                  "buffer had dropped them)",
                  (unsigned long long)r->out_lost, (unsigned long long)r->err_lost);
    if (!ended)
        cli_error("process %s is still running; continue with 'sbx logs SESSION %s "
                  "--since %llu,%llu' or 'sbx send'",
                  r->id, r->id, (unsigned long long)r->out_cursor,
                  (unsigned long long)r->err_cursor);
    else if (!r->eof)
        cli_error("process %s ended; more output is kept: 'sbx logs SESSION %s "
                  "--since %llu,%llu'",
                  r->id, r->id, (unsigned long long)r->out_cursor,
                  (unsigned long long)r->err_cursor);
    return status;
}
