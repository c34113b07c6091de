/*
 * test_cli_tty.c - `sbx exec -it` in a real terminal: a tmux pane (private
 * server socket) runs sbx, the test types into it with send-keys and reads
 * the screen with capture-pane. Checked: the program's terminal has the
 * pane's size and is a tty; a resize of the tmux window reaches it; Ctrl-C
 * goes to its foreground process group (sbx keeps running); Ctrl-D is its
 * EOF; the pane's terminal is in raw mode while sbx runs and its `stty -g`
 * settings are back afterwards - also after sbx is killed with SIGTERM.
 * Skipped when tmux is not installed (scripts/deps.sh test installs it).
 */
#include "cli_harness.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cli_env env;
static char sock[PATH_MAX + 16];

/* SBX_TEST_CLI_PROVIDER=docker: the same on docker (test_cli_tty_docker;
 * skipped without SBX_TEST_DOCKER_HOST). */
static void setup(void)
{
    cli_env_init(&env);
    const char *p = getenv("SBX_TEST_CLI_PROVIDER");
    if (p && !strcmp(p, "docker"))
        cli_env_docker_config(&env, NULL);
    else
        cli_env_local_config(&env);
    snprintf(sock, sizeof sock, "%s/tmux.sock", env.dir);
}

static void teardown(void)
{
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "tmux -S '%s' kill-server >/dev/null 2>&1", sock);
    if (system(cmd) != 0) {
        /* no server left */
    }
    struct cli_result r;
    cli_run(&env, (const char *[]){"destroy", "s", NULL}, NULL, 30000, &r);
    cli_result_free(&r);
    cli_env_fini(&env);
}

TestSuite(cli_tty, .init = setup, .fini = teardown, .timeout = 90);

static void need_tmux(void)
{
    if (system("command -v tmux >/dev/null 2>&1") != 0)
        cr_skip_test("tmux is not installed");
}

/* Run `tmux -S sock ARGS` (printf-style); returns its exit status. */
static int tmux(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int tmux(const char *fmt, ...)
{
    char args[4096], cmd[4096 + PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "tmux -S '%s' %s", sock, args);
    return system(cmd);
}

/* Output of `tmux -S sock ARGS`, malloc'd. */
static char *tmux_out(const char *args)
{
    char cmd[4096 + PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "tmux -S '%s' %s", sock, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0)
        len += n;
    buf[len] = '\0';
    pclose(f);
    return buf;
}

/* Wait until the screen shows needle (10 s). */
static void wait_screen(const char *needle)
{
    char *s = NULL;
    for (int i = 0; i < 200; i++) {
        free(s);
        s = tmux_out("capture-pane -p -t t");
        if (strstr(s, needle)) {
            free(s);
            return;
        }
        usleep(50 * 1000);
    }
    cr_assert_fail("\"%s\" never appeared; the screen:\n%s", needle, s);
}

/* The contents of a file of the test's directory, or NULL. */
static char *slurp(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", env.dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 8192);
    size_t n = fread(buf, 1, 8191, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static char *wait_file(const char *name)
{
    for (int i = 0; i < 200; i++) {
        char *s = slurp(name);
        if (s && strchr(s, '\n'))
            return s;
        free(s);
        usleep(50 * 1000);
    }
    cr_assert_fail("%s was never written; the screen:\n%s", name,
                   tmux_out("capture-pane -p -t t"));
    return NULL;
}

/* Start a tmux session "t" (100x30, no status line) whose pane runs
 * `sbx exec -it s ARGS` between two `stty -g` into before/after and
 * writes its exit status into "status". */
static void start_pane_cmd(const char *sbx_args)
{
    char script[PATH_MAX + 64];
    snprintf(script, sizeof script, "%s/pane.sh", env.dir);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "export PATH=/usr/local/bin:/usr/bin:/bin HOME='%s' XDG_STATE_HOME='%s'\n"
            "export SBX_PLUGIN_PATH='%s' SBX_CONFIG='%s' LC_ALL=C\n"
            "unset SBX_PROVIDER\n"
            "cd '%s'\n"
            "stty -g > before\n"
            "echo $$ > pane.pid\n"
            "'%s' %s\n"
            "echo \"status=$?\" > status\n"
            "stty -g > after\n"
            "exec sleep 1000\n",
            env.home, env.state, env.plugin_path, env.config, env.dir, CLI_SBX_BIN,
            sbx_args);
    fclose(f);
    /* the sandbox exists first, so the pane's sbx starts at once */
    struct cli_result r;
    cli_run(&env, (const char *[]){"exec", "s", "--", "true", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(tmux("-f /dev/null new-session -d -s t -x 100 -y 30 'sh %s' \\; "
                      "set-option -g status off",
                      script),
                 0);
}

static void start_pane(const char *exec_args)
{
    char args[1024];
    snprintf(args, sizeof args, "exec -it s %s", exec_args);
    start_pane_cmd(args);
}

/* pid of the pane's sbx: the only child of the pane's shell. */
static pid_t sbx_pid(void)
{
    char *p = wait_file("pane.pid");
    pid_t sh = (pid_t)atol(p);
    free(p);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)sh, (int)sh);
    for (int i = 0; i < 100; i++) {
        FILE *f = fopen(path, "r");
        long child = 0;
        if (f) {
            if (fscanf(f, "%ld", &child) != 1)
                child = 0;
            fclose(f);
        }
        if (child > 0)
            return (pid_t)child;
        usleep(50 * 1000);
    }
    cr_assert_fail("the pane's sbx never started");
    return -1;
}

/* `stty -g` of the pane's terminal right now (from outside). */
static char *pane_stty(void)
{
    char *tty = tmux_out("display -p -t t '#{pane_tty}'");
    tty[strcspn(tty, "\n")] = '\0';
    char cmd[256];
    snprintf(cmd, sizeof cmd, "stty -F %s -g", tty);
    free(tty);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char *buf = calloc(1, 1024);
    if (!fgets(buf, 1024, f))
        buf[0] = '\0';
    pclose(f);
    return buf;
}

Test(cli_tty, size_tty_resize_ctrl_c_ctrl_d_and_the_terminal_restored)
{
    need_tmux();
    start_pane("-e 'PS1=ready> ' -- sh");
    pid_t pid = sbx_pid();
    char *before = wait_file("before");

    /* a tty of the pane's size */
    wait_screen("ready>");
    char *size = tmux_out("display -p -t t '#{pane_height} #{pane_width}'");
    size[strcspn(size, "\n")] = '\0';
    tmux("send-keys -t t 'echo \"<$(stty size)>\"; tty' Enter");
    char want[64];
    snprintf(want, sizeof want, "<%s>", size);
    wait_screen(want);
    wait_screen("/dev/pts/");
    free(size);

    /* raw mode on our side while sbx runs */
    char *during = pane_stty();
    cr_assert_str_neq(during, before, "the pane's terminal was not switched to raw mode");
    free(during);

    /* a resize of the window reaches the program */
    cr_assert_eq(tmux("resize-window -t t -x 120 -y 40"), 0);
    usleep(200 * 1000);
    tmux("send-keys -t t 'clear; echo \"[$(stty size)]\"' Enter");
    wait_screen("[40 120]");

    /* Ctrl-C reaches the foreground process group, not sbx */
    tmux("send-keys -t t 'sleep 100' Enter");
    usleep(300 * 1000);
    tmux("send-keys -t t C-c");
    tmux("send-keys -t t 'echo \"rc=$?\"' Enter");
    wait_screen("rc=130");
    cr_assert(!cli_pid_gone(pid), "Ctrl-C killed sbx itself");
    char *st = slurp("status");
    cr_assert_null(st, "sbx ended: %s", st);

    /* Ctrl-D is the shell's EOF: it ends, and sbx with its status */
    tmux("send-keys -t t C-d");
    st = wait_file("status");
    cr_assert_str_eq(st, "status=0\n");
    free(st);
    char *after = wait_file("after");
    cr_assert_str_eq(after, before, "the terminal was not restored");
    free(after);
    free(before);
}

Test(cli_tty, the_terminal_is_restored_after_sigterm)
{
    need_tmux();
    start_pane("-- sh -c 'echo started; exec sleep 100'");
    pid_t pid = sbx_pid();
    char *before = wait_file("before");
    wait_screen("started");
    char *during = pane_stty();
    cr_assert_str_neq(during, before, "not in raw mode while sbx runs");
    free(during);
    cr_assert_eq(kill(pid, SIGTERM), 0);
    char *st = wait_file("status");
    cr_assert_str_eq(st, "status=143\n");
    free(st);
    char *after = wait_file("after");
    cr_assert_str_eq(after, before, "the terminal was not restored after SIGTERM");
    free(after);
    free(before);
    /* the command was hung up, as a closed terminal does */
    struct cli_result r;
    for (int i = 0; i < 50; i++) {
        cli_run(&env, (const char *[]){"ps", "s", NULL}, NULL, 30000, &r);
        if (!strstr(r.out, "running"))
            break;
        cli_result_free(&r);
        usleep(100 * 1000);
    }
    cr_assert_not_null(strstr(r.out, "signal HUP"), "%s", r.out);
    cli_result_free(&r);
}

Test(cli_tty, the_exit_status_is_the_commands)
{
    need_tmux();
    start_pane("-- sh -c 'stty size; exit 9'");
    char *st = wait_file("status");
    cr_assert_str_eq(st, "status=9\n");
    free(st);
    char *before = wait_file("before"), *after = wait_file("after");
    cr_assert_str_eq(after, before);
    free(before);
    free(after);
}

/* `sbx attach` from another sbx to a PTY process started with --detach:
 * the output kept so far, interactive input, then SIGTERM detaches (the
 * terminal restored, the process still running) and a second attach
 * resumes from a cursor. */
Test(cli_tty, attach_is_interactive_and_detaches_on_sigterm)
{
    need_tmux();
    struct cli_result r;
    cli_run(&env, (const char *[]){"exec", "--detach", "-t", "-e", "PS1=sh> ", "s", "--",
                                   "sh", "-c", "echo before-attach; exec sh", NULL},
            NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char id[256];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    cli_result_free(&r);
    char args[512];
    snprintf(args, sizeof args, "attach s %s", id);
    start_pane_cmd(args);
    pid_t pid = sbx_pid();
    char *before = wait_file("before");
    wait_screen("before-attach");
    tmux("send-keys -t t 'echo \"<$(stty size)>\"' Enter");
    wait_screen("<30 100>");
    cr_assert_eq(kill(pid, SIGTERM), 0);
    char *st = wait_file("status");
    cr_assert_str_eq(st, "status=143\n");
    free(st);
    char *after = wait_file("after");
    cr_assert_str_eq(after, before, "the terminal was not restored after attach");
    free(after);
    free(before);
    cli_run(&env, (const char *[]){"ps", "s", NULL}, NULL, 30000, &r);
    cr_assert_not_null(strstr(r.out, "running"), "attach's SIGTERM ended the process: %s",
                       r.out);
    cli_result_free(&r);
    /* the process is still there for a later reader, from a cursor */
    cli_run(&env, (const char *[]){"send", "--yield", "2000", "s", id, NULL},
            "echo again\n", 30000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "again"), "%s", r.out);
    cli_result_free(&r);
    cli_run(&env, (const char *[]){"kill", "-s", "KILL", "s", id, NULL}, NULL, 30000, &r);
    cli_result_free(&r);
}
