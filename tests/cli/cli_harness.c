/* cli_harness.c - spawning the sbx binary for the CLI tests. */
#include "cli_harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void join(char *out, size_t len, const char *a, const char *b)
{
    int n = snprintf(out, len, "%s/%s", a, b);
    cr_assert(n > 0 && (size_t)n < len, "path too long: %s/%s", a, b);
}

void cli_env_init(struct cli_env *e)
{
    memset(e, 0, sizeof *e);
    /* A child that stops reading its stdin must not kill the test. */
    signal(SIGPIPE, SIG_IGN);
    snprintf(e->dir, sizeof e->dir, "/tmp/sbx-cli-test-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir), "mkdtemp: %s", strerror(errno));
    join(e->home, sizeof e->home, e->dir, "home");
    join(e->state, sizeof e->state, e->dir, "state");
    join(e->ws_root, sizeof e->ws_root, e->dir, "ws");
    cr_assert_eq(mkdir(e->home, 0700), 0);
    cr_assert_eq(mkdir(e->state, 0700), 0);
    cr_assert_eq(mkdir(e->ws_root, 0700), 0);
    snprintf(e->plugin_path, sizeof e->plugin_path, "%s", SBX_TEST_PROVIDER_DIR);
}

void cli_env_write_config(struct cli_env *e, const char *yaml)
{
    join(e->config, sizeof e->config, e->dir, "sbx.yaml");
    FILE *f = fopen(e->config, "w");
    cr_assert_not_null(f, "%s: %s", e->config, strerror(errno));
    for (const char *p = yaml; *p;) {
        const char *at = strstr(p, "@ROOT@");
        size_t n = at ? (size_t)(at - p) : strlen(p);
        fwrite(p, 1, n, f);
        if (!at)
            break;
        fputs(e->ws_root, f);
        p = at + strlen("@ROOT@");
    }
    cr_assert_eq(fclose(f), 0);
}

void cli_env_local_config(struct cli_env *e)
{
    cli_env_write_config(e, "default_provider: local\n"
                            "providers:\n"
                            "  local:\n"
                            "    root: @ROOT@\n");
}

void cli_env_docker_config(struct cli_env *e, const char *head)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || !*host)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    const char *img = getenv("SBX_TEST_DOCKER_IMAGE");
    char yaml[8192];
    int n = snprintf(yaml, sizeof yaml,
                     "%sdefault_provider: docker\nproviders:\n  docker:\n    host: \"%s\"\n"
                     "    image: \"%s\"\n    resource_dir: \"@ROOT@\"\n",
                     head ? head : "", host, img && *img ? img : "sbx-test:busybox");
    cr_assert(n > 0 && (size_t)n < sizeof yaml, "docker configuration too long");
    cli_env_write_config(e, yaml);
}

void cli_env_add_fixtures(struct cli_env *e)
{
    size_t n = strlen(e->plugin_path);
    snprintf(e->plugin_path + n, sizeof e->plugin_path - n, ":%s", CLI_FIXTURE_DIR);
}

void cli_env_setenv(struct cli_env *e, const char *name, const char *value)
{
    size_t nlen = strlen(name);
    size_t i = 0;
    while (i < e->nextra &&
           !(strncmp(e->extra[i], name, nlen) == 0 && e->extra[i][nlen] == '='))
        i++;
    cr_assert(i < sizeof e->extra / sizeof e->extra[0], "too many variables");
    int n = snprintf(e->extra[i], sizeof e->extra[i], "%s=%s", name, value);
    cr_assert(n > 0 && (size_t)n < sizeof e->extra[i], "variable too long");
    if (i == e->nextra)
        e->nextra++;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void cli_env_fini(struct cli_env *e)
{
    if (e->dir[0])
        nftw(e->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int cli_dir_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

/* Append "NAME=value" to the child's environment. */
static void add_var(char **envp, size_t *n, char *storage, size_t *used, size_t len,
                    const char *name, const char *value)
{
    int w = snprintf(storage + *used, len - *used, "%s=%s", name, value);
    cr_assert(w > 0 && (size_t)w < len - *used, "environment too large");
    envp[(*n)++] = storage + *used;
    *used += (size_t)w + 1;
}

/* Build the child's whole environment (envp has room for 16 entries). */
static void make_env(const struct cli_env *e, char **envp, char *storage, size_t len)
{
    static const char *const passed[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS",
                                         "LSAN_OPTIONS"};
    size_t n = 0, used = 0;
    add_var(envp, &n, storage, &used, len, "PATH", "/usr/local/bin:/usr/bin:/bin");
    add_var(envp, &n, storage, &used, len, "HOME", e->home);
    add_var(envp, &n, storage, &used, len, "XDG_STATE_HOME", e->state);
    add_var(envp, &n, storage, &used, len, "SBX_PLUGIN_PATH", e->plugin_path);
    add_var(envp, &n, storage, &used, len, "LC_ALL", "C");
    if (e->config[0])
        add_var(envp, &n, storage, &used, len, "SBX_CONFIG", e->config);
    for (size_t i = 0; i < e->nextra; i++) {
        size_t w = strlen(e->extra[i]) + 1;
        cr_assert(w <= len - used, "environment too large");
        memcpy(storage + used, e->extra[i], w);
        envp[n++] = storage + used;
        used += w;
    }
    for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++) {
        const char *v = getenv(passed[i]);
        if (v)
            add_var(envp, &n, storage, &used, len, passed[i], v);
    }
    envp[n] = NULL;
}

void cli_spawn(const struct cli_env *e, const char *const *args, enum cli_stdin in,
               struct cli_proc *p)
{
    int out[2], err[2], inp[2] = {-1, -1};
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
    if (in == CLI_STDIN_PIPE)
        cr_assert_eq(pipe2(inp, O_CLOEXEC), 0);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (in == CLI_STDIN_PIPE)
        posix_spawn_file_actions_adddup2(&fa, inp[0], 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);

    /* sbx in its own process group, with default signal dispositions. */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETPGROUP);

    const char *argv[64];
    size_t n = 0;
    argv[n++] = CLI_SBX_BIN;
    for (size_t i = 0; args[i]; i++) {
        cr_assert(n < 63, "too many arguments");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    char *envp[16];
    char storage[12 * PATH_MAX];
    make_env(e, envp, storage, sizeof storage);

    int rc = posix_spawn(&p->pid, CLI_SBX_BIN, &fa, &attr, (char *const *)argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    cr_assert_eq(rc, 0, "posix_spawn %s: %s", CLI_SBX_BIN, strerror(rc));
    close(out[1]);
    close(err[1]);
    if (in == CLI_STDIN_PIPE)
        close(inp[0]);
    p->out_fd = out[0];
    p->err_fd = err[0];
    p->in_fd = inp[1];
    fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
}

void cli_read_err(struct cli_proc *p, char *buf, size_t cap, int timeout_ms)
{
    size_t len = 0;
    for (long long end = cli_now_ms() + timeout_ms; cli_now_ms() < end;) {
        struct pollfd pf = {.fd = p->err_fd, .events = POLLIN};
        poll(&pf, 1, 200);
        ssize_t n = read(p->err_fd, buf + len, cap - 1 - len);
        if (n == 0)
            break;
        if (n > 0)
            len += (size_t)n;
        if (len == cap - 1)
            break;
    }
    buf[len] = '\0';
}

bool cli_read_line(struct cli_proc *p, char *buf, size_t len, int timeout_ms)
{
    long long deadline = cli_now_ms() + timeout_ms;
    size_t used = 0;
    for (;;) {
        char c;
        ssize_t n = read(p->out_fd, &c, 1);
        if (n == 1) {
            if (c == '\n') {
                buf[used] = '\0';
                return true;
            }
            if (used + 1 < len)
                buf[used++] = c;
            continue;
        }
        if (n == 0)
            return false;
        if (errno != EAGAIN && errno != EINTR)
            return false;
        long long left = deadline - cli_now_ms();
        if (left <= 0)
            return false;
        struct pollfd pfd = {p->out_fd, POLLIN, 0};
        poll(&pfd, 1, (int)left);
    }
}

static int decode_status(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return CLI_KILLED_BY + WTERMSIG(st);
    return -1;
}

int cli_wait(struct cli_proc *p, int timeout_ms)
{
    long long deadline = cli_now_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid)
            break;
        cr_assert_neq(r, -1, "waitpid: %s", strerror(errno));
        if (cli_now_ms() >= deadline) {
            kill(-p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            st = -1;
            break;
        }
        usleep(5000);
    }
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->err_fd >= 0)
        close(p->err_fd);
    if (p->in_fd >= 0)
        close(p->in_fd);
    p->out_fd = p->err_fd = p->in_fd = -1;
    return st == -1 ? -1 : decode_status(st);
}

struct buf {
    char *data;
    size_t len, cap;
};

static void reserve(struct buf *b)
{
    if (b->cap - b->len < 4096) {
        b->cap = b->cap ? b->cap * 2 : 8192;
        b->data = realloc(b->data, b->cap);
        cr_assert_not_null(b->data);
    }
}

/* Read what is available; true at EOF (or a read error). */
static bool drain(int fd, struct buf *b)
{
    for (;;) {
        reserve(b);
        ssize_t n = read(fd, b->data + b->len, b->cap - b->len - 1);
        if (n > 0) {
            b->len += (size_t)n;
            continue;
        }
        if (n == 0)
            return true; /* EOF */
        return errno != EAGAIN && errno != EINTR;
    }
}

void cli_run(const struct cli_env *e, const char *const *args, const char *input,
             int timeout_ms, struct cli_result *r)
{
    struct cli_proc p;
    cli_spawn(e, args, input ? CLI_STDIN_PIPE : CLI_STDIN_NULL, &p);
    long long deadline = cli_now_ms() + timeout_ms;
    struct buf out = {0}, err = {0};
    bool out_eof = false, err_eof = false;
    size_t in_pos = 0, in_len = input ? strlen(input) : 0;
    if (input)
        fcntl(p.in_fd, F_SETFL, O_NONBLOCK);
    if (input && in_len == 0) {
        close(p.in_fd);
        p.in_fd = -1;
    }
    while (!(out_eof && err_eof) && cli_now_ms() < deadline) {
        struct pollfd pfd[3];
        int n = 0;
        if (!out_eof)
            pfd[n++] = (struct pollfd){p.out_fd, POLLIN, 0};
        if (!err_eof)
            pfd[n++] = (struct pollfd){p.err_fd, POLLIN, 0};
        if (p.in_fd >= 0)
            pfd[n++] = (struct pollfd){p.in_fd, POLLOUT, 0};
        poll(pfd, (nfds_t)n, 50);
        if (!out_eof)
            out_eof = drain(p.out_fd, &out);
        if (!err_eof)
            err_eof = drain(p.err_fd, &err);
        if (p.in_fd >= 0) {
            ssize_t w = write(p.in_fd, input + in_pos, in_len - in_pos);
            if (w > 0)
                in_pos += (size_t)w;
            if (in_pos == in_len || (w < 0 && errno == EPIPE)) {
                close(p.in_fd);
                p.in_fd = -1;
            }
        }
    }
    long long left = deadline - cli_now_ms();
    r->status = cli_wait(&p, left > 0 ? (int)left : 1);
    reserve(&out);
    reserve(&err);
    out.data[out.len] = '\0';
    err.data[err.len] = '\0';
    r->out = out.data;
    r->err = err.data;
}

void cli_run_pty(const struct cli_env *e, const char *const *args, int timeout_ms,
                 struct cli_result *r)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    cr_assert_geq(master, 0, "posix_openpt: %s", strerror(errno));
    cr_assert_eq(grantpt(master), 0);
    cr_assert_eq(unlockpt(master), 0);
    char name[128];
    cr_assert_eq(ptsname_r(master, name, sizeof name), 0);
    const char *argv[64];
    size_t n = 0;
    argv[n++] = CLI_SBX_BIN;
    for (size_t i = 0; args[i]; i++) {
        cr_assert(n < 63, "too many arguments");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    char *envp[16];
    char storage[12 * PATH_MAX];
    make_env(e, envp, storage, sizeof storage);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* a session of its own with the terminal as its controlling one */
        setsid();
        int slave = open(name, O_RDWR);
        if (slave < 0 || ioctl(slave, TIOCSCTTY, 0) != 0)
            _exit(127);
        struct winsize ws = {.ws_row = 24, .ws_col = 120};
        ioctl(slave, TIOCSWINSZ, &ws);
        dup2(slave, 0);
        dup2(slave, 1);
        dup2(slave, 2);
        if (slave > 2)
            close(slave);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(CLI_SBX_BIN, (char *const *)argv, envp);
        _exit(127);
    }
    fcntl(master, F_SETFL, O_NONBLOCK);
    long long deadline = cli_now_ms() + timeout_ms;
    struct buf out = {0};
    bool eof = false;
    while (!eof && cli_now_ms() < deadline) {
        struct pollfd pfd = {master, POLLIN, 0};
        poll(&pfd, 1, 50);
        eof = drain(master, &out); /* EIO once the last slave fd closed */
    }
    struct cli_proc p = {.pid = pid, .out_fd = -1, .err_fd = -1, .in_fd = -1};
    long long left = deadline - cli_now_ms();
    r->status = cli_wait(&p, left > 0 ? (int)left : 1);
    close(master);
    reserve(&out);
    out.data[out.len] = '\0';
    r->out = out.data;
    r->err = calloc(1, 1);
}

void cli_result_free(struct cli_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

bool cli_pid_gone(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": the state follows the last ')'. */
    const char *close_paren = strrchr(buf, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}
