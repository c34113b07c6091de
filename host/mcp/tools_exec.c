/*
 * tools_exec.c - exec_command and write_stdin (docs/MCP.md), the agent's
 * shell: a command runs until it ends or for yield_time_ms, whichever
 * comes first; one still running is left in the sandbox with a process_id
 * that write_stdin continues from (the server keeps each process's read
 * cursors, so no byte is shown twice; bytes the replay buffer lost are
 * counted in lost_bytes).
 *
 * On a provider with processes (SBX_CAP_PROCESSES) the calls are
 * sbx_proc_exec_yield / sbx_proc_send_yield in slices of a second (one
 * progress notification per slice). Output is capped per call at
 * max_output_bytes, never above --max-output-bytes: the head and the tail
 * are kept (sbx_capture), the middle is counted in truncated_bytes, and
 * the process's output is read through to the end of the yield so that
 * the cursors move past what was dropped. Without processes the command
 * runs to its end with sbx_exec (timeout_ms, else EXEC_FALLBACK_TIMEOUT_MS)
 * and no process_id.
 *
 * Cancellation (notifications/cancelled, the end of input) kills the
 * process: a cancelled call leaves nothing running.
 */
#include "internal.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXEC_DEFAULT_YIELD_MS 10000
#define STDIN_DEFAULT_YIELD_MS 250
#define DEFAULT_OUTPUT_BYTES ((int64_t)64 << 10)
#define SLICE_MS 1000u
#define READ_BYTES ((uint64_t)1 << 20)
#define EXEC_FALLBACK_TIMEOUT_MS ((int64_t)600000)
#define ENV_MAX 1024

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What one call collected: the combined output and each stream. */
struct collected {
    sbx_capture all, out, err;
    uint64_t lost;
};

struct tee {
    sbx_capture *one, *all;
};

static int tee_write(void *ctx, const void *buf, size_t len)
{
    struct tee *t = ctx;
    struct sbx_sink a = sbx_capture_sink(t->one), b = sbx_capture_sink(t->all);
    int rc = a.write(a.ctx, buf, len);
    return rc ? rc : b.write(b.ctx, buf, len);
}

static void collected_init(struct collected *k, size_t cap)
{
    sbx_capture_init(&k->all, cap / 2, cap - cap / 2);
    sbx_capture_init(&k->out, cap / 2, cap - cap / 2);
    sbx_capture_init(&k->err, cap / 2, cap - cap / 2);
    k->lost = 0;
}

static void collected_free(struct collected *k)
{
    sbx_capture_free(&k->all);
    sbx_capture_free(&k->out);
    sbx_capture_free(&k->err);
}

static uint64_t dropped(const sbx_capture *c)
{
    return c->total - c->head_len - c->tail_len;
}

static json_object *capture_value(const sbx_capture *c)
{
    char *t = sbx_capture_text(c);
    /* its length: the output may hold NULs; the marker is the one
     * sbx/sbx.h documents for sbx_capture_text */
    size_t len = c->head_len + c->tail_len;
    if (c->truncated)
        len += (size_t)snprintf(NULL, 0, "\n[... %" PRIu64 " bytes truncated ...]\n",
                                dropped(c));
    json_object *v = t ? sbxm_text_value(t, len, NULL) : NULL;
    free(t);
    return v ? v : json_object_new_string("");
}

/* The result shape shared by both tools. */
static json_object *result_of(struct collected *k, bool tty, bool running, const char *id,
                              bool exited, int exit_code, int term_signal, bool timed_out,
                              int64_t started)
{
    json_object *r = json_object_new_object();
    json_object_object_add(r, "output", capture_value(&k->all));
    if (!tty) {
        json_object_object_add(r, "stdout", capture_value(&k->out));
        json_object_object_add(r, "stderr", capture_value(&k->err));
    }
    if (exited) {
        json_object_object_add(r, "exit_code",
                               json_object_new_int(term_signal ? 128 + term_signal : exit_code));
        if (term_signal)
            json_object_object_add(r, "signal", json_object_new_int(term_signal));
    } else {
        json_object_object_add(r, "exit_code", NULL);
    }
    json_object_object_add(r, "timed_out", json_object_new_boolean(timed_out));
    json_object_object_add(r, "running", json_object_new_boolean(running));
    if (running && id)
        json_object_object_add(r, "process_id", json_object_new_string(id));
    json_object_object_add(r, "lost_bytes", json_object_new_int64((int64_t)k->lost));
    json_object_object_add(r, "truncated_bytes",
                           json_object_new_int64((int64_t)dropped(&k->all)));
    json_object_object_add(r, "wall_time_ms", json_object_new_int64(now_ms() - started));
    return r;
}

/* The cap of this call: max_output_bytes, never above the operator's. */
static size_t output_cap(struct sbxm_call *c)
{
    int64_t want = sbxm_arg_int(c, "max_output_bytes", DEFAULT_OUTPUT_BYTES);
    size_t limit = sbxm_options(c->srv)->max_output_bytes;
    if (want < 1)
        want = 1;
    return (uint64_t)want > limit ? limit : (size_t)want;
}

static uint64_t provider_caps(sbx_handle *h)
{
    sbx_provider *p = sbx_handle_provider(h);
    return p ? sbx_provider_info_caps(sbx_provider_get_info(p)) : 0;
}

/* Kill a process a cancelled call leaves behind (its own cancel has
 * fired, so the signal goes without one). */
static void kill_process(sbx_handle *h, const char *id)
{
    sbx_error e;
    if (id && id[0])
        sbx_proc_signal(h, id, SIGKILL, NULL, &e);
}

/*
 * Read the process's output from st's cursors for at most yield_ms (the
 * first slice after writing data/close when given, or after starting
 * spec), into k; updates st's cursors. Returns the status, *res the last
 * yield result.
 */
static int run_yield(struct sbxm_call *c, sbx_handle *h, const struct sbx_proc_spec *spec,
                     const char *id_in, const char *data, size_t len, uint32_t wflags,
                     int64_t yield_ms, struct collected *k, struct sbxm_proc_state *st,
                     struct sbx_proc_yield_result *res, sbx_error *err)
{
    struct tee to = {&k->out, &k->all}, te = {&k->err, &k->all};
    struct sbx_sink out = SBX_SINK_INIT(&to, tee_write), errs = SBX_SINK_INIT(&te, tee_write);
    int64_t start = now_ms(), deadline = start + yield_ms;
    char id[SBX_PROC_ID_MAX] = "";
    if (id_in)
        snprintf(id, sizeof id, "%s", id_in);
    bool first = true;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left < 0)
            left = 0;
        struct sbx_proc_yield_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.yield_ms = (uint32_t)(left < SLICE_MS ? left : SLICE_MS);
        a.max_bytes = READ_BYTES;
        a.out_cursor = st->out_cursor;
        a.err_cursor = st->err_cursor;
        a.out = &out;
        a.err = &errs;
        memset(res, 0, sizeof *res);
        res->size = sizeof *res;
        int rc;
        if (first && spec) {
            rc = sbx_proc_exec_yield(h, spec, &a, res, c->cancel, err);
            snprintf(id, sizeof id, "%s", res->id);
        } else if (first) {
            rc = sbx_proc_send_yield(h, id, data, len, wflags, &a, res, c->cancel, err);
        } else {
            rc = sbx_proc_send_yield(h, id, NULL, 0, 0, &a, res, c->cancel, err);
        }
        first = false;
        if (rc != SBX_OK) {
            if (rc == SBX_E_CANCELLED || sbxm_cancelled(c))
                kill_process(h, id);
            return rc;
        }
        st->out_cursor = res->out_cursor;
        st->err_cursor = res->err_cursor;
        k->lost += res->out_lost + res->err_lost;
        if (res->eof || now_ms() >= deadline)
            return SBX_OK;
        if (sbxm_cancelled(c)) {
            kill_process(h, id);
            return sbx_error_set(err, SBX_E_CANCELLED, "cancelled");
        }
        if (!res->truncated) {
            int64_t done = now_ms() - start;
            char msg[64];
            snprintf(msg, sizeof msg, "running, %lld ms", (long long)done);
            sbxm_progress(c, (double)done, (double)yield_ms, msg);
        }
    }
}

/* The command of exec_command: argv, or sh -c cmd. */
static int command_of(struct sbxm_call *c, const char ***argv, sbx_error *err)
{
    const char *cmd = sbxm_arg_str(c, "cmd");
    json_object *av = NULL;
    json_object_object_get_ex(c->args, "argv", &av);
    if ((cmd != NULL) == (av != NULL))
        return sbx_error_set(err, SBX_E_INVALID, "give exactly one of cmd and argv");
    size_t n = av ? json_object_array_length(av) : 3;
    if (n == 0)
        return sbx_error_set(err, SBX_E_INVALID, "argv is empty");
    const char **v = calloc(n + 1, sizeof *v);
    if (!v)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    if (cmd) {
        v[0] = "sh";
        v[1] = "-c";
        v[2] = cmd;
    } else {
        for (size_t i = 0; i < n; i++)
            v[i] = json_object_get_string(json_object_array_get_idx(av, i));
    }
    *argv = v;
    return SBX_OK;
}

static bool env_name_ok(const char *k)
{
    if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
        return false;
    for (k++; *k; k++)
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
              (*k >= '0' && *k <= '9') || *k == '_'))
            return false;
    return true;
}

/* env {NAME: value} as "NAME=value" strings (NULL-terminated; *env NULL
 * when absent). *store holds the strings. */
static int env_of(struct sbxm_call *c, const char ***env, char **store, sbx_error *err)
{
    *env = NULL;
    *store = NULL;
    json_object *eo = NULL;
    if (!json_object_object_get_ex(c->args, "env", &eo))
        return SBX_OK;
    size_t n = 0, bytes = 0;
    json_object_object_foreach(eo, k, v) {
        if (!env_name_ok(k))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "env: \"%.64s\" is not a variable name", k);
        if (!json_object_is_type(v, json_type_string) ||
            strlen(json_object_get_string(v)) != (size_t)json_object_get_string_len(v))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "env.%.64s: expected a string without NUL", k);
        if (++n > ENV_MAX)
            return sbx_error_set(err, SBX_E_INVALID, "env: more than %d variables", ENV_MAX);
        bytes += strlen(k) + 1 + (size_t)json_object_get_string_len(v) + 1;
    }
    const char **list = calloc(n + 1, sizeof *list);
    char *s = malloc(bytes + 1);
    if (!list || !s) {
        free(list);
        free(s);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    size_t i = 0, used = 0;
    json_object_object_foreach(eo, k2, v2) {
        list[i++] = s + used;
        used += (size_t)sprintf(s + used, "%s=%s", k2, json_object_get_string(v2)) + 1;
    }
    *env = list;
    *store = s;
    return SBX_OK;
}

static int exec_fallback(struct sbxm_call *c, sbx_handle *h, const char *const *argv,
                         const char *const *env, struct collected *k, int64_t started,
                         json_object **result, sbx_error *err)
{
    if (sbxm_arg_bool(c, "tty", false))
        return sbx_error_set(err, SBX_E_UNSUPPORTED,
                             "tty: the provider has no processes and no terminals");
    struct tee to = {&k->out, &k->all}, te = {&k->err, &k->all};
    struct sbx_sink out = SBX_SINK_INIT(&to, tee_write), errs = SBX_SINK_INIT(&te, tee_write);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.env = env;
    a.cwd = sbxm_arg_str(c, "cwd");
    a.timeout_ms = sbxm_arg_int(c, "timeout_ms", 0);
    if (a.timeout_ms <= 0)
        a.timeout_ms = EXEC_FALLBACK_TIMEOUT_MS;
    a.out = &out;
    a.err = &errs;
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    int rc = sbx_exec(h, &a, &r, c->cancel, err);
    if (rc != SBX_OK)
        return rc;
    json_object *o = result_of(k, false, false, NULL, true, r.exit_code, r.term_signal,
                               r.timed_out != 0, started);
    json_object_object_add(o, "note",
                           json_object_new_string("the provider has no processes: the "
                                                  "command ran to its end (no yield, no "
                                                  "process_id)"));
    *result = o;
    return SBX_OK;
}

static int exec_command(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    int64_t started = now_ms();
    const char *sandbox = sbxm_arg_str(c, "sandbox"), *user = sbxm_arg_str(c, "user");
    sbx_handle *h;
    int rc = sbxm_handle_as(c, sandbox, user, &h, err);
    if (rc != SBX_OK)
        return rc;
    const char **argv = NULL, **env = NULL;
    char *env_store = NULL;
    if ((rc = command_of(c, &argv, err)) != SBX_OK)
        return rc;
    if ((rc = env_of(c, &env, &env_store, err)) != SBX_OK) {
        free(argv);
        return rc;
    }
    struct collected k;
    collected_init(&k, output_cap(c));
    uint64_t caps = provider_caps(h);
    bool tty = sbxm_arg_bool(c, "tty", false);
    if (!(caps & SBX_CAP_PROCESSES)) {
        rc = exec_fallback(c, h, argv, env, &k, started, result, err);
        goto out;
    }
    if (tty && !(caps & SBX_CAP_PTY)) {
        rc = sbx_error_set(err, SBX_E_UNSUPPORTED, "tty: provider %s has no terminals (pty)",
                           sbx_provider_info_name(sbx_provider_get_info(sbx_handle_provider(h))));
        goto out;
    }
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.flags = tty ? SBX_PROC_PTY : 0;
    spec.argv = argv;
    spec.env = env;
    spec.cwd = sbxm_arg_str(c, "cwd");
    spec.timeout_ms = sbxm_arg_int(c, "timeout_ms", 0);
    struct sbxm_proc_state st;
    memset(&st, 0, sizeof st);
    st.tty = tty;
    if (user)
        snprintf(st.user, sizeof st.user, "%s", user);
    struct sbx_proc_yield_result res;
    rc = run_yield(c, h, &spec, NULL, NULL, 0, 0,
                   sbxm_arg_int(c, "yield_time_ms", EXEC_DEFAULT_YIELD_MS), &k, &st, &res, err);
    if (rc != SBX_OK)
        goto out;
    bool exited = res.state == SBX_PROC_EXITED;
    bool running = !res.eof;
    if (running)
        sbxm_proc_put(c->srv, sandbox, res.id, &st);
    *result = result_of(&k, tty, running, res.id, exited && res.eof, res.exit_code,
                        res.term_signal, res.timed_out != 0, started);
out:
    collected_free(&k);
    free(argv);
    free(env);
    free(env_store);
    return rc;
}

static int write_stdin(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    int64_t started = now_ms();
    const char *sandbox = sbxm_arg_str(c, "sandbox"), *id = sbxm_arg_str(c, "process_id");
    struct sbxm_proc_state st;
    memset(&st, 0, sizeof st);
    /* a process this server did not start (or forgot): from the start of
     * its replay buffer */
    sbxm_proc_get(c->srv, sandbox, id, &st);
    sbx_handle *h;
    int rc = sbxm_handle_as(c, sandbox, st.user[0] ? st.user : NULL, &h, err);
    if (rc != SBX_OK)
        return rc;
    if (!(provider_caps(h) & SBX_CAP_PROCESSES))
        return sbx_error_set(err, SBX_E_UNSUPPORTED,
                             "the provider has no processes: exec_command runs each command "
                             "to its end");
    json_object *cv = NULL;
    json_object_object_get_ex(c->args, "chars", &cv);
    const char *chars = cv ? json_object_get_string(cv) : "";
    size_t len = cv ? (size_t)json_object_get_string_len(cv) : 0;
    uint32_t wflags = sbxm_arg_bool(c, "close_stdin", false) ? SBX_PROC_WRITE_CLOSE : 0;
    struct collected k;
    collected_init(&k, output_cap(c));
    struct sbx_proc_yield_result res;
    rc = run_yield(c, h, NULL, id, chars, len, wflags,
                   sbxm_arg_int(c, "yield_time_ms", STDIN_DEFAULT_YIELD_MS), &k, &st, &res,
                   err);
    if (rc == SBX_OK) {
        bool running = !res.eof;
        if (running)
            sbxm_proc_put(c->srv, sandbox, id, &st);
        else
            sbxm_proc_forget(c->srv, sandbox, id);
        *result = result_of(&k, st.tty, running, id, res.state == SBX_PROC_EXITED && res.eof,
                            res.exit_code, res.term_signal, res.timed_out != 0, started);
    }
    collected_free(&k);
    return rc;
}

/* The signals kill_process sends by name (Linux numbers, as proc_signal
 * takes them); others by number. */
static const struct {
    const char *name;
    int signo;
} signal_names[] = {{"HUP", 1}, {"INT", 2}, {"QUIT", 3}, {"KILL", 9},
                    {"USR1", 10}, {"USR2", 12}, {"TERM", 15}, {"CONT", 18},
                    {"STOP", 19}, {"WINCH", 28}};

/* The signal argument: a name above (with or without "SIG") or 1..64;
 * absent is TERM. 0 when it is neither. */
static int signal_arg(struct sbxm_call *c)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(c->args, "signal", &v) || !v)
        return 15;
    if (json_object_is_type(v, json_type_int)) {
        int64_t n = json_object_get_int64(v);
        return n >= 1 && n <= 64 ? (int)n : 0;
    }
    const char *s = json_object_get_string(v);
    if (!s)
        return 0;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++)
        if (strcmp(s, signal_names[i].name) == 0)
            return signal_names[i].signo;
    return 0;
}

/* Send a signal to a process exec_command left running; its output and
 * status are read with write_stdin as before. */
static int signal_process(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    const char *sandbox = sbxm_arg_str(c, "sandbox"), *id = sbxm_arg_str(c, "process_id");
    int signo = signal_arg(c);
    if (!signo)
        return sbx_error_set(err, SBX_E_INVALID,
                             "signal: expected one of HUP, INT, QUIT, KILL, USR1, USR2, TERM, "
                             "CONT, STOP, WINCH or a number from 1 to 64");
    struct sbxm_proc_state st;
    memset(&st, 0, sizeof st);
    sbxm_proc_get(c->srv, sandbox, id, &st);
    sbx_handle *h;
    int rc = sbxm_handle_as(c, sandbox, st.user[0] ? st.user : NULL, &h, err);
    if (rc != SBX_OK)
        return rc;
    if (!(provider_caps(h) & SBX_CAP_PROCESSES))
        return sbx_error_set(err, SBX_E_UNSUPPORTED,
                             "the provider has no processes: no command outlives its "
                             "exec_command call");
    rc = sbx_proc_signal(h, id, signo, c->cancel, err);
    if (rc != SBX_OK)
        return rc;
    *result = json_object_new_object();
    json_object_object_add(*result, "process_id", json_object_new_string(id));
    json_object_object_add(*result, "signal", json_object_new_int(signo));
    return SBX_OK;
}

#define KEY_SCHEMA "{\"type\":\"string\",\"minLength\":1,\"maxLength\":1024}"
#define OUTPUT_SCHEMA                                                                     \
    "{\"type\":\"object\",\"properties\":{\"output\":{\"type\":\"string\"},\"stdout\":"   \
    "{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},\"exit_code\":{\"type\":"     \
    "[\"integer\",\"null\"]},\"signal\":{\"type\":\"integer\"},\"timed_out\":{\"type\":"  \
    "\"boolean\"},\"running\":{\"type\":\"boolean\"},\"process_id\":{\"type\":\"string\"}," \
    "\"lost_bytes\":{\"type\":\"integer\"},\"truncated_bytes\":{\"type\":\"integer\"},"    \
    "\"wall_time_ms\":{\"type\":\"integer\"},\"note\":{\"type\":\"string\"}},\"required\":" \
    "[\"output\",\"exit_code\",\"running\",\"lost_bytes\",\"truncated_bytes\","            \
    "\"wall_time_ms\"]}"
#define YIELD_SCHEMA(dflt)                                                                \
    "{\"type\":\"integer\",\"minimum\":0,\"maximum\":600000,\"description\":\"return "   \
    "after this many ms with the output so far (default " dflt ")\"}"
#define CAP_SCHEMA                                                                        \
    "{\"type\":\"integer\",\"minimum\":1,\"maximum\":1073741824,\"description\":\"keep "  \
    "at most this many bytes of output (head and tail; default 65536, never above the "   \
    "server's --max-output-bytes)\"}"

const struct sbxm_tool sbxm_tools_exec[] = {
    {
        .name = "exec_command",
        .title = "Run a command",
        .description =
            "Run a command in the sandbox: `cmd` (by sh -c) or `argv`. Returns when it "
            "ends or after yield_time_ms with the output so far; a command still running "
            "has a process_id for write_stdin. exit_code is 128+N after signal N.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA ",\"cmd\":{"
            "\"type\":\"string\",\"maxLength\":1048576},\"argv\":{\"type\":\"array\","
            "\"maxItems\":4096,\"items\":{\"type\":\"string\"}},\"cwd\":{\"type\":\"string\","
            "\"maxLength\":4096,\"description\":\"workspace-relative\"},\"env\":{\"type\":"
            "\"object\",\"description\":\"NAME: value; nothing else of the server's "
            "environment reaches the command\"},\"timeout_ms\":{\"type\":\"integer\","
            "\"minimum\":0,\"maximum\":86400000,\"description\":\"kill the command after "
            "this many ms (0: never)\"},\"yield_time_ms\":" YIELD_SCHEMA("10000")
            ",\"max_output_bytes\":" CAP_SCHEMA ",\"tty\":{\"type\":\"boolean\"},\"user\":"
            "{\"type\":\"string\",\"minLength\":1,\"maxLength\":32}},\"required\":"
            "[\"sandbox\"],\"additionalProperties\":false}",
        .output_schema = OUTPUT_SCHEMA,
        .group = SBXM_TOOLS_AGENT,
        .read_only = false,
        .run = exec_command,
    },
    {
        .name = "write_stdin",
        .title = "Write to a running command",
        .description = "Write `chars` to the stdin of a command exec_command left running "
                       "(none: just read), optionally closing it, and return its output "
                       "since the last call, as exec_command does.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA ",\"process_id\":"
            "{\"type\":\"string\",\"minLength\":1,\"maxLength\":127},\"chars\":{\"type\":"
            "\"string\",\"maxLength\":1048576},\"close_stdin\":{\"type\":\"boolean\"},"
            "\"yield_time_ms\":" YIELD_SCHEMA("250") ",\"max_output_bytes\":" CAP_SCHEMA
            "},\"required\":[\"sandbox\",\"process_id\"],\"additionalProperties\":false}",
        .output_schema = OUTPUT_SCHEMA,
        .group = SBXM_TOOLS_AGENT,
        .read_only = false,
        .run = write_stdin,
    },
    {
        .name = "kill_process",
        .title = "Signal a running command",
        .description = "Send a signal (default TERM; KILL, INT, HUP, ... or a number) to the "
                       "process group of a command exec_command left running; read what it "
                       "printed and how it ended with write_stdin.",
        .input_schema =
            "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA ",\"process_id\":"
            "{\"type\":\"string\",\"minLength\":1,\"maxLength\":127},\"signal\":{"
            "\"type\":[\"string\",\"integer\"],\"maxLength\":16,\"description\":\"a "
            "name (TERM, KILL, INT, HUP, QUIT, USR1, USR2, CONT, STOP, WINCH) or 1 to 64\"}},"
            "\"required\":[\"sandbox\",\"process_id\"],\"additionalProperties\":false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"process_id\":{\"type\":"
                         "\"string\"},\"signal\":{\"type\":\"integer\"}},\"required\":["
                         "\"process_id\",\"signal\"]}",
        .group = SBXM_TOOLS_AGENT,
        .read_only = false,
        .run = signal_process,
    },
    {0},
};
