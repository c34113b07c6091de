/*
 * test_mcp_exec.c - exec_command and write_stdin through a running
 * `sbx mcp` on the local provider (processes, pty): quick commands,
 * yielding and continuing without losing or repeating a byte, the output
 * cap, tty, timeout, cancellation (the process is gone and no response is
 * sent), progress, concurrency, --max-calls, EOF while calls run. The
 * docker suite repeats the core on the test daemon when
 * SBX_TEST_DOCKER_HOST is set.
 */
#include "mcp_harness.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The session key of these tests: a key names one container on the shared
 * test daemon, so it is unlike the other test binaries' keys. */
#define SB "mcp-exec"

#define T 15000

static void create(struct mcp_client *c, const char *name)
{
    char args[256];
    snprintf(args, sizeof args, "{\"sandbox\":\"%s\"}", name);
    json_object *r = mcp_call(c, 900, "create_sandbox", args, 60000, NULL);
    cr_assert(r && !mcp_is_error(r), "create_sandbox: %s", mcp_text(r));
    json_object_put(r);
}

static json_object *exec(struct mcp_client *c, int id, const char *args)
{
    int code = 0;
    json_object *r = mcp_call(c, id, "exec_command", args, T, &code);
    cr_assert(r, "exec_command %s: error %d", args, code);
    cr_assert(!mcp_is_error(r), "exec_command %s: %s", args, mcp_text(r));
    return r;
}

static int64_t sc_int(json_object *r, const char *k)
{
    json_object *v = mcp_sc(r, k);
    cr_assert(v, "no %s in %s", k, json_object_to_json_string(r));
    return json_object_get_int64(v);
}

static bool sc_bool(json_object *r, const char *k)
{
    return json_object_get_boolean(mcp_sc(r, k));
}

static void quick(struct mcp_client *c)
{
    json_object *r = exec(c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"echo out; echo err >&2; exit 3\"}");
    cr_assert_eq(sc_int(r, "exit_code"), 3);
    cr_assert_str_eq(mcp_sc_str(r, "stdout"), "out\n");
    cr_assert_str_eq(mcp_sc_str(r, "stderr"), "err\n");
    cr_assert(!sc_bool(r, "running"));
    cr_assert_null(mcp_sc(r, "process_id"));
    /* the text content is the same JSON */
    json_object *sc, *t = json_tokener_parse(mcp_text(r));
    json_object_object_get_ex(r, "structuredContent", &sc);
    cr_assert(json_object_equal(t, sc));
    json_object_put(t);
    json_object_put(r);
    r = exec(c, 2, "{\"sandbox\":\"" SB "\",\"argv\":[\"printf\",\"%s|\",\"a b\",\"c\"],"
                   "\"env\":{\"X\":\"1\"}}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "a b|c|");
    json_object_put(r);
    r = exec(c, 3, "{\"sandbox\":\"" SB "\",\"cmd\":\"printf %s \\\"$X\\\"\",\"env\":{\"X\":\"v\"}}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "v");
    json_object_put(r);
}

/* Start a command that outlives its yield, then finish it by write_stdin. */
static void yield_and_continue(struct mcp_client *c)
{
    json_object *r = exec(c, 10, "{\"sandbox\":\"" SB "\",\"cmd\":\"echo ready; read x; echo got "
                                 "$x\",\"yield_time_ms\":300}");
    cr_assert(sc_bool(r, "running"), "%s", json_object_to_json_string(r));
    cr_assert(json_object_is_type(mcp_sc(r, "exit_code"), json_type_null));
    cr_assert_str_eq(mcp_sc_str(r, "output"), "ready\n");
    char id[160];
    snprintf(id, sizeof id, "%s", mcp_sc_str(r, "process_id"));
    json_object_put(r);
    char args[512];
    snprintf(args, sizeof args,
             "{\"sandbox\":\"" SB "\",\"process_id\":\"%s\",\"chars\":\"hello\\n\","
             "\"yield_time_ms\":5000}",
             id);
    r = mcp_call(c, 11, "write_stdin", args, T, NULL);
    cr_assert(r && !mcp_is_error(r), "%s", mcp_text(r));
    cr_assert_str_eq(mcp_sc_str(r, "output"), "got hello\n", "only what came since");
    cr_assert_eq(sc_int(r, "exit_code"), 0);
    cr_assert(!sc_bool(r, "running"));
    json_object_put(r);
}

Test(exec, quick_commands)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    quick(&c);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, yield_then_write_stdin)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    yield_and_continue(&c);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, polling_sees_every_byte_once)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    json_object *r = exec(&c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"for i in 1 2 3 4 5; do echo $i; "
                                 "sleep 0.2; done\",\"yield_time_ms\":100}");
    char all[256] = "", id[160];
    strcat(all, mcp_sc_str(r, "stdout"));
    snprintf(id, sizeof id, "%s", mcp_sc_str(r, "process_id"));
    bool running = sc_bool(r, "running");
    json_object_put(r);
    cr_assert(running);
    for (int i = 2; running && i < 60; i++) {
        char args[512];
        snprintf(args, sizeof args,
                 "{\"sandbox\":\"" SB "\",\"process_id\":\"%s\",\"yield_time_ms\":150}", id);
        r = mcp_call(&c, i, "write_stdin", args, T, NULL);
        cr_assert(r && !mcp_is_error(r), "%s", mcp_text(r));
        strncat(all, mcp_sc_str(r, "stdout"), sizeof all - strlen(all) - 1);
        running = sc_bool(r, "running");
        if (!running)
            cr_assert_eq(sc_int(r, "exit_code"), 0);
        json_object_put(r);
    }
    cr_assert(!running);
    cr_assert_str_eq(all, "1\n2\n3\n4\n5\n");
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, output_cap_keeps_head_and_tail)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    json_object *r = exec(&c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"printf START; head -c 300000 "
                                 "/dev/zero | tr '\\\\0' x; printf END\",\"max_output_bytes\":"
                                 "1000}");
    cr_assert_eq(sc_int(r, "exit_code"), 0);
    cr_assert_eq(sc_int(r, "truncated_bytes"), 300008 - 1000);
    const char *out = mcp_sc_str(r, "output");
    cr_assert_eq(strncmp(out, "START", 5), 0);
    cr_assert_str_eq(out + strlen(out) - 3, "END");
    cr_assert(strstr(out, "truncated"), "the marker says where bytes were dropped");
    cr_assert_lt(strlen(out), 1200);
    json_object_put(r);
    /* the operator's cap wins over a larger ask */
    cr_assert_eq(mcp_stop(&c, T), 0);
    mcp_start(&c, (const char *const[]){"--max-output-bytes", "100", NULL});
    create(&c, SB);
    r = exec(&c, 2, "{\"sandbox\":\"" SB "\",\"cmd\":\"head -c 5000 /dev/zero | tr '\\\\0' y\","
                    "\"max_output_bytes\":1000000}");
    cr_assert_eq(sc_int(r, "truncated_bytes"), 4900);
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, invalid_utf8_output_stays_valid_json)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    json_object *r = exec(&c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"printf 'a\\\\377\\\\000b'\"}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "a\xef\xbf\xbd\xef\xbf\xbd" "b");
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, tty)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    json_object *r = exec(&c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"test -t 0 && test -t 1 && echo "
                                 "isatty\",\"tty\":true}");
    cr_assert(strstr(mcp_sc_str(r, "output"), "isatty"), "%s", mcp_sc_str(r, "output"));
    cr_assert_null(mcp_sc(r, "stdout"), "one stream on a terminal");
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, timeout_kills)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    long long t0 = cli_now_ms();
    json_object *r = exec(&c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"sleep 30\",\"timeout_ms\":300}");
    cr_assert(sc_bool(r, "timed_out"), "%s", json_object_to_json_string(r));
    cr_assert(!sc_bool(r, "running"));
    cr_assert_eq(sc_int(r, "exit_code"), 128 + 9);
    cr_assert_lt(cli_now_ms() - t0, 5000);
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

/* The pid the command wrote into the workspace (local: a host pid). */
static pid_t read_pid(struct mcp_client *c, const char *file)
{
    char path[PATH_MAX * 2];
    for (int i = 0; i < 100; i++) {
        /* the local provider's workspaces live below ws_root */
        char cmd[PATH_MAX * 3];
        snprintf(cmd, sizeof cmd, "find '%s' -name '%s' 2>/dev/null | head -1", c->env.ws_root,
                 file);
        FILE *p = popen(cmd, "r");
        path[0] = '\0';
        if (p) {
            if (!fgets(path, sizeof path, p))
                path[0] = '\0';
            pclose(p);
        }
        path[strcspn(path, "\n")] = '\0';
        FILE *f = path[0] ? fopen(path, "r") : NULL;
        if (f) {
            int pid = 0;
            int n = fscanf(f, "%d", &pid);
            fclose(f);
            if (n == 1 && pid > 0)
                return (pid_t)pid;
        }
        usleep(50000);
    }
    cr_assert_fail("the command never wrote %s", file);
    return 0;
}

Test(exec, cancelled_call_kills_and_sends_nothing)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"exec_command\",\"arguments\":{\"sandbox\":\"" SB "\",\"cmd\":\"echo $$ > "
                 "cancel.pid; exec sleep 30\",\"yield_time_ms\":60000}}}");
    pid_t pid = read_pid(&c, "cancel.pid");
    cr_assert_eq(kill(pid, 0), 0, "running before the cancel");
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                 "{\"requestId\":7,\"reason\":\"test\"}}");
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = cli_pid_gone(pid);
        if (!gone)
            usleep(50000);
    }
    cr_assert(gone, "the cancelled command still runs");
    /* no response for 7: the next thing answered is the ping */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
    json_object *m;
    while ((m = mcp_read(&c, 2000))) {
        json_object *id;
        if (json_object_object_get_ex(m, "id", &id) && json_object_get_int(id) == 8) {
            json_object_put(m);
            break;
        }
        cr_assert(!(id && json_object_get_int(id) == 7), "a response to the cancelled call: %s",
                  json_object_to_json_string(m));
        json_object_put(m);
    }
    cr_assert(m, "no answer to the ping");
    /* and nothing comes later either */
    m = mcp_read(&c, 500);
    cr_assert_null(m, "%s", json_object_to_json_string(m));
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, progress_notifications)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"exec_command\",\"arguments\":{\"sandbox\":\"" SB "\",\"cmd\":\"sleep 2.5\"},"
                 "\"_meta\":{\"progressToken\":\"tok\"}}}");
    json_object *r = mcp_wait(&c, 5, T);
    cr_assert(r);
    json_object_put(r);
    cr_assert_geq(c.progress, 2, "%d progress notifications", c.progress);
    json_object *p, *tok;
    json_object_object_get_ex(c.last_progress, "params", &p);
    cr_assert(json_object_object_get_ex(p, "progressToken", &tok));
    cr_assert_str_eq(json_object_get_string(tok), "tok");
    /* without a token: none */
    c.progress = 0;
    r = exec(&c, 6, "{\"sandbox\":\"" SB "\",\"cmd\":\"sleep 1.5\"}");
    json_object_put(r);
    cr_assert_eq(c.progress, 0);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, sixteen_calls_at_once)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    long long t0 = cli_now_ms();
    for (int i = 0; i < 16; i++)
        mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
                     "{\"name\":\"exec_command\",\"arguments\":{\"sandbox\":\"" SB "\",\"cmd\":"
                     "\"sleep 1; echo n%d\"}}}",
                 100 + i, i);
    bool seen[16] = {false};
    for (int n = 0; n < 16; n++) {
        json_object *m = mcp_read(&c, T), *id, *res;
        cr_assert(m, "only %d of 16 answered", n);
        cr_assert(json_object_object_get_ex(m, "id", &id));
        int i = json_object_get_int(id) - 100;
        cr_assert(i >= 0 && i < 16 && !seen[i]);
        seen[i] = true;
        cr_assert(json_object_object_get_ex(m, "result", &res));
        char want[16];
        snprintf(want, sizeof want, "n%d\n", i);
        cr_assert_str_eq(mcp_sc_str(res, "output"), want);
        json_object_put(m);
    }
    cr_assert_lt(cli_now_ms() - t0, 8000, "the calls ran side by side");
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, max_calls_answers_busy_and_duplicate_ids)
{
    struct mcp_client c;
    mcp_start(&c, (const char *const[]){"--max-calls", "2", NULL});
    create(&c, SB);
    for (int i = 0; i < 2; i++)
        mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
                     "{\"name\":\"exec_command\",\"arguments\":{\"sandbox\":\"" SB "\",\"cmd\":"
                     "\"sleep 2\"}}}",
                 20 + i);
    usleep(200000);
    /* the same id again while it runs */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"list_sandboxes\"}}");
    json_object *m = mcp_read(&c, T);
    cr_assert_eq(mcp_error_code(m), -32600, "%s", json_object_to_json_string(m));
    json_object_put(m);
    long long t0 = cli_now_ms();
    json_object *r = mcp_call(&c, 22, "list_sandboxes", "{}", T, NULL);
    cr_assert(mcp_is_error(r), "a third call is refused");
    cr_assert(strstr(mcp_text(r), "busy"), "%s", mcp_text(r));
    cr_assert_lt(cli_now_ms() - t0, 1000, "refused at once, not queued");
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, eof_while_calls_run)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"exec_command\",\"arguments\":{\"sandbox\":\"" SB "\",\"cmd\":\"echo $$ > "
                 "eof.pid; exec sleep 60\",\"yield_time_ms\":60000}}}");
    pid_t pid = read_pid(&c, "eof.pid");
    long long t0 = cli_now_ms();
    cr_assert_eq(mcp_stop(&c, T), 0);
    cr_assert_lt(cli_now_ms() - t0, 5000, "the server ends promptly at EOF");
    cr_assert(cli_pid_gone(pid), "the call's command was killed");
}

/* kill_process ends a command that ignores its stdin; write_stdin then
 * reports the signal. Bad signals and foreign ids are tool errors. */
Test(exec, kill_process_ends_a_running_command)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    json_object *r = exec(&c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"echo started; sleep 30\","
                                 "\"yield_time_ms\":300}");
    cr_assert(sc_bool(r, "running"), "%s", mcp_text(r));
    char id[160], args[512];
    snprintf(id, sizeof id, "%s", mcp_sc_str(r, "process_id"));
    json_object_put(r);
    snprintf(args, sizeof args, "{\"sandbox\":\"" SB "\",\"process_id\":\"%s\",\"signal\":"
             "\"SIGBOGUS\"}", id);
    r = mcp_call(&c, 2, "kill_process", args, T, NULL);
    cr_assert(mcp_is_error(r) && strstr(mcp_text(r), "signal: expected"), "%s", mcp_text(r));
    json_object_put(r);
    r = mcp_call(&c, 3, "kill_process", "{\"sandbox\":\"" SB "\",\"process_id\":\"pnotmine\"}",
                 T, NULL);
    cr_assert(mcp_is_error(r), "a process id the sandbox did not make: %s", mcp_text(r));
    json_object_put(r);
    snprintf(args, sizeof args, "{\"sandbox\":\"" SB "\",\"process_id\":\"%s\",\"signal\":"
             "\"KILL\"}", id);
    r = mcp_call(&c, 4, "kill_process", args, T, NULL);
    cr_assert(r && !mcp_is_error(r), "%s", mcp_text(r));
    cr_assert_eq(sc_int(r, "signal"), 9);
    json_object_put(r);
    snprintf(args, sizeof args, "{\"sandbox\":\"" SB "\",\"process_id\":\"%s\","
             "\"yield_time_ms\":5000}", id);
    r = mcp_call(&c, 5, "write_stdin", args, T, NULL);
    cr_assert(r && !mcp_is_error(r), "%s", mcp_text(r));
    cr_assert(!sc_bool(r, "running"), "%s", mcp_text(r));
    cr_assert_eq(sc_int(r, "exit_code"), 128 + 9, "%s", mcp_text(r));
    cr_assert_eq(sc_int(r, "signal"), 9);
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(exec, errors_are_tool_errors)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    create(&c, SB);
    json_object *r = mcp_call(&c, 1, "exec_command", "{\"sandbox\":\"nope\",\"cmd\":\"true\"}", T,
                              NULL);
    cr_assert(mcp_is_error(r));
    cr_assert(strstr(mcp_text(r), "sbx: exec_command: "), "%s", mcp_text(r));
    json_object_put(r);
    r = mcp_call(&c, 2, "exec_command", "{\"sandbox\":\"" SB "\",\"cmd\":\"true\",\"argv\":[\"x\"]}",
                 T, NULL);
    cr_assert(mcp_is_error(r));
    cr_assert(strstr(mcp_text(r), "exactly one of cmd and argv"), "%s", mcp_text(r));
    json_object_put(r);
    r = mcp_call(&c, 3, "exec_command", "{\"sandbox\":\"" SB "\",\"cmd\":\"true\",\"env\":{\"A=B\":"
                 "\"x\"}}", T, NULL);
    cr_assert(mcp_is_error(r));
    json_object_put(r);
    r = mcp_call(&c, 4, "write_stdin", "{\"sandbox\":\"" SB "\",\"process_id\":\"pnotmine\"}", T,
                 NULL);
    cr_assert(mcp_is_error(r), "a process id the sandbox did not make");
    json_object_put(r);
    r = mcp_call(&c, 5, "destroy_sandbox", "{\"sandbox\":\"" SB "\"}", 60000, NULL);
    cr_assert(r && !mcp_is_error(r), "%s", mcp_text(r));
    json_object_put(r);
    r = mcp_call(&c, 6, "exec_command", "{\"sandbox\":\"" SB "\",\"cmd\":\"true\"}", T, NULL);
    cr_assert(mcp_is_error(r), "a destroyed sandbox");
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

/* A provider without processes (the noports fixture: local declared with
 * no capability): the command runs to its end with sbx_exec. */
Test(exec, without_processes_runs_to_the_end)
{
    struct mcp_client c;
    mcp_start_yaml(&c, (const char *const[]){"--provider", "noports", NULL},
                   "providers:\n  noports:\n    root: @ROOT@\n    log: /dev/null\n", SBX_TEST_SESSION_FIXTURE_DIR);
    create(&c, SB);
    json_object *r = exec(&c, 1, "{\"sandbox\":\"" SB "\",\"cmd\":\"sleep 0.3; echo hi; exit 2\","
                                 "\"yield_time_ms\":50}");
    cr_assert_eq(sc_int(r, "exit_code"), 2, "ran to its end past the yield");
    cr_assert_str_eq(mcp_sc_str(r, "stdout"), "hi\n");
    cr_assert(!sc_bool(r, "running"));
    cr_assert_null(mcp_sc(r, "process_id"));
    cr_assert(strstr(mcp_sc_str(r, "note"), "no processes"), "%s", mcp_text(r));
    json_object_put(r);
    r = exec(&c, 2, "{\"sandbox\":\"" SB "\",\"cmd\":\"sleep 30\",\"timeout_ms\":300}");
    cr_assert(sc_bool(r, "timed_out"));
    json_object_put(r);
    r = mcp_call(&c, 3, "exec_command", "{\"sandbox\":\"" SB "\",\"cmd\":\"true\",\"tty\":true}",
                 T, NULL);
    cr_assert(mcp_is_error(r));
    json_object_put(r);
    r = mcp_call(&c, 4, "write_stdin", "{\"sandbox\":\"" SB "\",\"process_id\":\"p1\"}", T, NULL);
    cr_assert(mcp_is_error(r));
    cr_assert(strstr(mcp_text(r), "no processes"), "%s", mcp_text(r));
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(docker, exec_and_yield)
{
    struct mcp_client c;
    mcp_start_docker(&c, NULL);
    create(&c, SB);
    quick(&c);
    yield_and_continue(&c);
    json_object *r = mcp_call(&c, 50, "destroy_sandbox", "{\"sandbox\":\"" SB "\"}", 60000, NULL);
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}
