/*
 * procs.c - processes that outlive the call (SBX_CAP_PROCESSES, SBX_CAP_PTY).
 *
 * envd keeps no output history (its Connect streams from "now" on), so the
 * replay buffer is kept inside the sandbox, beside the process, by a small
 * POSIX-sh supervisor this file starts through envd (process.Process/Start
 * of a launcher that detaches the supervisor with setsid and returns once
 * the command runs). Per process, a directory PROC_BASE/<id>/ holds:
 *
 *   out.<k>, err.<k>  chunk k of each stream (9 decimal digits), exactly C
 *                     bytes each but the last, written by `split --filter`
 *                     as the output arrives: byte n is byte n % C of chunk
 *                     n / C, so a cursor needs no index. When chunk n
 *                     starts, chunk n - K is removed: the last K chunks,
 *                     at least buffer_bytes, stay.
 *   out.head          the newest chunk's number (written before it exists)
 *   in                a FIFO: the command's stdin (a `script` holding a PTY
 *                     with SBX_PROC_PTY), held open by a sleeping writer
 *                     until stdin is closed
 *   pid, tty, cmd     the command's process group, its terminal, its argv
 *   exit              "<status> <timed out>" once it ended and its output
 *                     is all recorded
 *
 * The id carries what a reader needs and nothing of the host process:
 * "<sandbox tag>-<start ms>-<random>-<log2 C><p|n><buffer bytes>". The tag (8 hex of
 * SHA-256 of the sandbox id) ties it to this sandbox: another sandbox's id
 * is SBX_E_NOT_FOUND before anything is sent. proc_read fetches chunks with
 * GET /files and polls for new bytes (envd has no wait on a file). Signals,
 * stdin and resizes are short helper commands (kill, cat into the FIFO,
 * stty -F). See e2b_core.h and docs/providers/e2b.md, "Processes".
 */
#include "clock.h"
#include "e2b_core.h"
#include "helper_exec.h"
#include "hex.h"

#include <errno.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROC_BASE E2B_PROC_BASE
#define POLL_FIRST_MS 20
#define POLL_MAX_MS 250

/* The launcher: checks the program, makes the directory and FIFOs, starts
 * the supervisor detached ($9) and waits until the command runs.
 * $1 dir $2 chunk $3 keep $4 pty $5 rows $6 cols $7 timeout (s) $8 the PTY
 * command line $9 the supervisor, then argv. Exit 127/126: no such
 * program / not executable; 125: the sandbox lacks a tool. */
static const char LAUNCH[] =
    "d=$1; c=$2; k=$3; t=$4; r=$5; w=$6; to=$7; line=$8; sup=$9; hx=${10}; shift 10\n"
    "p=$1\n"
    "case $p in\n"
    "*/*) if [ ! -e \"$p\" ]; then echo \"$p: no such file or directory\" >&2; exit 127; fi\n"
    "     if [ -d \"$p\" ] || [ ! -x \"$p\" ]; then echo \"$p: permission denied\" >&2; exit 126; fi;;\n"
    "*) command -v -- \"$p\" >/dev/null 2>&1 || { echo \"$p: executable file not found in $PATH\" >&2; exit 127; };;\n"
    "esac\n"
    "for x in split setsid mkfifo; do command -v $x >/dev/null 2>&1 || "
    "{ echo \"$x is missing in the sandbox\" >&2; exit 125; }; done\n"
    "if [ \"$t\" = 1 ]; then command -v script >/dev/null 2>&1 && command -v stty >/dev/null 2>&1 || "
    "{ echo \"script (util-linux) and stty are missing in the sandbox\" >&2; exit 125; }; fi\n"
    "umask 077\n"
    "[ -d \"${d%/*}/.index\" ] || mkdir -p \"${d%/*}/.index\" || exit 125\n"
    "mkdir \"$d\" && mkfifo \"$d/in\" \"$d/o.p\" \"$d/e.p\" || exit 125\n"
    "printf '%s ' \"$@\" > \"$d/cmd\"\n"
    ": > \"${d%/*}/.index/${d##*/}~R~$hx\"\n"
    "setsid sh -c \"$sup\" sbx-proc \"$d\" \"$c\" \"$k\" \"$t\" \"$r\" \"$w\" \"$to\" \"$line\" \"$@\" "
    "</dev/null >/dev/null 2>&1 &\n"
    "exit 0\n";

/* The supervisor (see the file comment): recorders, stdin holder, the
 * command (in a session of its own; through script with a PTY), the
 * timeout's watchdog, then (once the output is written) the index entry's
 * end and the exit record, in that order: a read that saw the end finds
 * it in the listing too.
 * A shell starts its background commands with SIGINT and SIGQUIT ignored
 * (and a shell cannot undo that for what it was given ignored): env
 * --default-signal gives the command the default actions back, so ^C and
 * proc_signal(SIGINT) work. */
static const char SUPERVISE[] =
    "d=$1; c=$2; k=$3; t=$4; to=$7; line=$8; shift 8\n"
    "rec() {\n"
    "  SBXP_K=$k split -a 9 -d -b \"$c\" --filter='n=${FILE##*.}; "
    "while :; do case $n in 0?*) n=${n#0};; *) break;; esac; done; b=${FILE%.*}; "
    "printf %s \"$n\" > \"$b.h.t\" && mv -f \"$b.h.t\" \"$b.head\"; o=$((n - SBXP_K)); "
    "if [ \"$o\" -ge 0 ]; then rm -f \"$b.$(printf %09d \"$o\")\"; fi; exec cat > \"$FILE\"' "
    "- \"$d/$1.\"\n"
    "  : > \"$d/$1.done\"\n"
    "}\n"
    "rec out < \"$d/o.p\" &\n"
    "if [ \"$t\" = 1 ]; then : > \"$d/err.done\"; else rec err < \"$d/e.p\" & fi\n"
    "sleep 2147483647 > \"$d/in\" &\n"
    "echo $! > \"$d/inhold\"\n"
    "ds=; env --default-signal=INT,QUIT true 2>/dev/null && ds='env --default-signal=INT,QUIT'\n"
    "if [ \"$t\" = 1 ]; then\n"
    "  e=; script --help 2>&1 | grep -q -- --echo && e='--echo always'\n"
    "  SHELL=/bin/sh $ds setsid script -q -e -f $e -c \"$line\" /dev/null < \"$d/in\" > \"$d/o.p\" 2>&1 &\n"
    "else\n"
    "  $ds setsid sh -c 'echo $$ > \"$0/pid.t\" && mv \"$0/pid.t\" \"$0/pid\" && exec \"$@\"' "
    "\"$d\" \"$@\" < \"$d/in\" > \"$d/o.p\" 2> \"$d/e.p\" &\n"
    "fi\n"
    "cp=$!\n"
    "wd=\n"
    "if [ \"$to\" != 0 ]; then\n"
    "  ( sleep \"$to\"; : > \"$d/timedout\"; kill -9 -\"$(cat \"$d/pid\")\" \"$cp\" 2>/dev/null ) &\n"
    "  wd=$!\n"
    "fi\n"
    "wait \"$cp\"; rc=$?\n"
    "i=0\n"
    "while [ ! -e \"$d/out.done\" ] || [ ! -e \"$d/err.done\" ]; do\n"
    "  i=$((i+1))\n"
    "  [ $i = 100 ] && kill -9 -\"$(cat \"$d/pid\")\" 2>/dev/null\n"
    "  [ $i -gt 400 ] && break\n"
    "  sleep 0.02\n"
    "done\n"
    "kill \"$(cat \"$d/inhold\")\" $wd 2>/dev/null\n"
    "[ -e \"$d/timedout\" ] && tf=1 || tf=0\n"
    "for f in \"${d%/*}/.index/${d##*/}~R~\"*; do\n"
    "  [ -e \"$f\" ] && mv -f \"$f\" \"${d%/*}/.index/${d##*/}~${rc}_$tf~${f##*~}\"\n"
    "done\n"
    "printf '%s %s\\n' \"$rc\" \"$tf\" > \"$d/exit.t\" && mv -f \"$d/exit.t\" \"$d/exit\"\n";

/* stdin: $1 dir $2 close (0/1) $3 pty (0/1); the bytes come on stdin.
 * Exit 3: the process ended or its stdin was closed. */
static const char WRITE[] =
    "d=$1\n"
    "[ -d \"$d\" ] || exit 2\n"
    "if [ -e \"$d/exit\" ] || [ -e \"$d/in.closed\" ]; then exit 3; fi\n"
    "cat 1<> \"$d/in\" || exit 1\n"
    "if [ \"$2\" = 1 ]; then\n"
    "  : > \"$d/in.closed\"\n"
    "  if [ \"$3\" = 1 ]; then printf '\\004' 1<> \"$d/in\"; else kill \"$(cat \"$d/inhold\")\" 2>/dev/null; fi\n"
    "fi\n"
    "exit 0\n";

/* A signal: $1 dir $2 number; with a PTY, to the terminal's foreground
 * process group (field 8 of /proc/<pid>/stat). */
static const char SIGNAL[] =
    "d=$1; s=$2\n"
    "[ -d \"$d\" ] || exit 2\n"
    "[ -e \"$d/exit\" ] && exit 0\n"
    "i=0; while [ ! -s \"$d/pid\" ] && [ ! -e \"$d/exit\" ]; do i=$((i+1)); [ $i -gt 1000 ] && exit 4; sleep 0.01; done\n"
    "[ -e \"$d/exit\" ] && exit 0\n"
    "pg=$(cat \"$d/pid\" 2>/dev/null) || exit 0\n"
    "if [ -e \"$d/tty\" ]; then\n"
    "  set -- $(sed 's/.*) //' \"/proc/$pg/stat\" 2>/dev/null)\n"
    "  [ -n \"${6:-}\" ] && [ \"$6\" -gt 0 ] && pg=$6\n"
    "fi\n"
    "kill -\"$s\" -\"$pg\" 2>/dev/null || kill -s \"$s\" -- -\"$pg\" 2>/dev/null\n"
    "exit 0\n";

/* A window size: $1 dir $2 rows $3 cols. Exit 3: ended. */
static const char RESIZE[] =
    "d=$1\n"
    "[ -d \"$d\" ] || exit 2\n"
    "i=0; while [ ! -s \"$d/tty\" ] && [ ! -e \"$d/exit\" ]; do i=$((i+1)); [ $i -gt 1000 ] && exit 4; sleep 0.01; done\n"
    "[ -e \"$d/exit\" ] && exit 3\n"
    "stty -F \"$(cat \"$d/tty\")\" rows \"$2\" cols \"$3\"\n";

/* Most bytes of a process's command kept for proc_list. */
#define CMD_LIST_MAX 100

/* What an id says. */
struct proc_id {
    int64_t ms;
    unsigned shift;  /* log2 of the chunk size */
    int pty;
    uint64_t buffer; /* bytes kept per stream */
    uint64_t keep;   /* chunks kept: enough for buffer whatever the offset */
};

/* Chunks kept for a buffer: every byte of the last `buffer` lies in them
 * wherever the stream's end falls in its chunk. */
static uint64_t keep_of(uint64_t buffer, unsigned shift)
{
    uint64_t chunk = UINT64_C(1) << shift;
    return (buffer + chunk - 1) / chunk + 1;
}

static void sandbox_tag(sbx_sandbox *sb, char tag[9])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    static const char hx[] = "0123456789abcdef";
    if (EVP_Digest(sb->id, strlen(sb->id), d, &n, EVP_sha256(), NULL) != 1 || n < 4)
        memset(d, 0, 4);
    for (int i = 0; i < 4; i++) {
        tag[2 * i] = hx[d[i] >> 4];
        tag[2 * i + 1] = hx[d[i] & 15];
    }
    tag[8] = '\0';
}

static int all_of(const char *s, size_t n, const char *set)
{
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(set, s[i]))
            return 0;
    return 1;
}

/* Parse and check an id; SBX_E_NOT_FOUND when it is not one of this
 * sandbox's (malformed ids included: the host checked the characters). */
static int parse_id(sbx_sandbox *sb, sbx_call *call, const char *id, struct proc_id *p)
{
    struct e2b_state *st = sb->st;
    char tag[9];
    sandbox_tag(sb, tag);
    static const char dig[] = "0123456789", hex[] = "0123456789abcdef";
    size_t n = strlen(id);
    /* tag(8) - ms(13) - rand(8) - shift(2) p|n buffer(1..10) */
    if (n < 36 || n > 45 || strncmp(id, tag, 8) != 0 || id[8] != '-' ||
        !all_of(id + 9, 13, dig) || id[22] != '-' || !all_of(id + 23, 8, hex) ||
        id[31] != '-' || !all_of(id + 32, 2, dig) || (id[34] != 'p' && id[34] != 'n') ||
        !all_of(id + 35, n - 35, dig) || n == 35)
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: no process %s in sandbox %s",
                         st->cfg.provider, id, sb->id);
    p->ms = strtoll(id + 9, NULL, 10);
    p->shift = (unsigned)((id[32] - '0') * 10 + (id[33] - '0'));
    p->pty = id[34] == 'p';
    p->buffer = strtoull(id + 35, NULL, 10);
    if (p->shift < 10 || p->shift > 16 || p->buffer < 1 || p->buffer > (UINT64_C(1) << 30))
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: no process %s in sandbox %s",
                         st->cfg.provider, id, sb->id);
    p->keep = keep_of(p->buffer, p->shift);
    return SBX_OK;
}

static void proc_dir(const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", PROC_BASE, id);
}

/* 'it' quoted for sh (malloc'd). */
static char *sh_quote(const char *s)
{
    size_t n = 2;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = malloc(n + 1), *o = q;
    if (!q)
        return NULL;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

/* The command line script runs with a PTY: size, the terminal's name, the
 * pid record, then exec of argv (each word quoted). */
static char *pty_line(const char *dir, const struct sbx_proc_spec *spec)
{
    char *qd = sh_quote(dir);
    if (!qd)
        return NULL;
    size_t len = 4 * strlen(qd) + 256;
    for (size_t i = 0; spec->argv[i]; i++)
        len += 4 * strlen(spec->argv[i]) + 3;
    char *line = malloc(len);
    if (!line) {
        free(qd);
        return NULL;
    }
    int n = snprintf(line, len,
                     "stty rows %u cols %u 2>/dev/null; tty > %s/tty; echo $$ > %s/pid.t; "
                     "mv %s/pid.t %s/pid; exec",
                     (unsigned)spec->rows, (unsigned)spec->cols, qd, qd, qd, qd);
    free(qd);
    for (size_t i = 0; spec->argv[i]; i++) {
        char *q = sh_quote(spec->argv[i]);
        if (!q) {
            free(line);
            return NULL;
        }
        n += snprintf(line + n, len - (size_t)n, " %s", q);
        free(q);
    }
    return line;
}

/* Run one of the scripts above as the configured user; *code its exit. */
static int run_script(sbx_sandbox *sb, sbx_call *call, const char *script,
                      const char *const *args, const char *const *env,
                      const struct sbx_source *in, const char *cwd,
                      const struct sbx_sink *out, int64_t timeout_ms, int *code, char *msg,
                      size_t cap)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = script;
    argv[n++] = "sbx-proc";
    for (size_t i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    struct sbxp_helper_exec h;
    sbxp_helper_exec_init(&h, argv, out, timeout_ms, msg, cap);
    h.args.env = env;
    h.args.in = in;
    int rc = e2b_exec_run(sb, call, &h.args, cwd, &h.res);
    *code = rc == SBX_OK ? sbxp_helper_exec_code(&h) : -1;
    return rc;
}

int e2b_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                   char id[SBX_PROC_ID_MAX])
{
    struct e2b_state *st = sb->st;
    const char *prov = st->cfg.provider;
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return e2b_error(st, call, SBX_E_INVALID, "%s: proc_start: empty argv", prov);
    size_t argc = 0;
    while (spec->argv[argc])
        argc++;
    if (argc > 48)
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: proc_start: %zu arguments, at most 48 (use a shell script)",
                         prov, argc);
    int pty = (spec->flags & SBX_PROC_PTY) != 0;
    uint64_t buffer = spec->buffer_bytes ? spec->buffer_bytes : (uint64_t)st->cfg.proc_buffer;
    if (buffer < 1 || buffer > (UINT64_C(1) << 30))
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: proc_start: a replay buffer of %llu bytes (at most 1 GiB)", prov,
                         (unsigned long long)buffer);
    unsigned shift = 16;
    while (shift > 10 && buffer < (UINT64_C(4) << shift))
        shift--;
    uint64_t chunk = UINT64_C(1) << shift;
    uint64_t keep = keep_of(buffer, shift);
    char *cwd = NULL;
    int rc;
    if (spec->cwd && *spec->cwd) {
        int type;
        rc = e2b_resolve(sb, call, "proc_start cwd", spec->cwd, 1, &cwd, &type);
        if (rc != SBX_OK)
            return rc;
        if (type != E2B_FT_DIR) {
            free(cwd);
            return e2b_error(st, call, SBX_E_INVALID, "%s: proc_start: cwd %s is not a directory",
                             prov, spec->cwd);
        }
    }
    e2b_keep_alive(sb, call);
    char tag[9], rnd[9];
    sandbox_tag(sb, tag);
    sbxs_random_hex(rnd, 4);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t now = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
    snprintf(id, SBX_PROC_ID_MAX, "%s-%013lld-%s-%02u%c%llu", tag, (long long)now, rnd, shift,
             pty ? 'p' : 'n', (unsigned long long)buffer);
    char dir[256];
    proc_dir(id, dir, sizeof dir);
    char *line = pty ? pty_line(dir, spec) : strdup("");
    /* TERM for a terminal, unless the caller set one. */
    size_t ne = 0;
    int has_term = 0;
    for (; spec->env && spec->env[ne]; ne++)
        if (!strncmp(spec->env[ne], "TERM=", 5))
            has_term = 1;
    const char **env = calloc(ne + 2, sizeof *env);
    if (!line || !env) {
        free(line);
        free(env);
        free(cwd);
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < ne; i++)
        env[i] = spec->env[i];
    if (pty && !has_term)
        env[ne++] = "TERM=xterm-256color";
    /* The listing's command, hex in the index entry's name (at most
     * CMD_LIST_MAX bytes of argv joined by spaces). */
    char hexcmd[2 * CMD_LIST_MAX + 1];
    static const char hx[] = "0123456789abcdef";
    size_t hl = 0;
    for (size_t i = 0; i < argc; i++) {
        const char *q = spec->argv[i];
        if (i > 0 && hl < 2 * CMD_LIST_MAX) {
            hexcmd[hl++] = hx[' ' >> 4];
            hexcmd[hl++] = hx[' ' & 15];
        }
        for (; *q && hl < 2 * CMD_LIST_MAX; q++) {
            hexcmd[hl++] = hx[(unsigned char)*q >> 4];
            hexcmd[hl++] = hx[(unsigned char)*q & 15];
        }
    }
    hexcmd[hl] = '\0';
    char cs[24], ks[24], rows[8], cols[8], to[32];
    snprintf(cs, sizeof cs, "%llu", (unsigned long long)chunk);
    snprintf(ks, sizeof ks, "%llu", (unsigned long long)keep);
    snprintf(rows, sizeof rows, "%u", spec->rows ? spec->rows : 24u);
    snprintf(cols, sizeof cols, "%u", spec->cols ? spec->cols : 80u);
    if (spec->timeout_ms > 0)
        snprintf(to, sizeof to, "%lld.%03lld", (long long)(spec->timeout_ms / 1000),
                 (long long)(spec->timeout_ms % 1000));
    else
        snprintf(to, sizeof to, "0");
    const char *args[64];
    size_t n = 0;
    args[n++] = dir;
    args[n++] = cs;
    args[n++] = ks;
    args[n++] = pty ? "1" : "0";
    args[n++] = rows;
    args[n++] = cols;
    args[n++] = to;
    args[n++] = line;
    args[n++] = SUPERVISE;
    args[n++] = hexcmd;
    for (size_t i = 0; i < argc; i++)
        args[n++] = spec->argv[i];
    args[n] = NULL;
    char msg[512];
    int code = -1;
    rc = run_script(sb, call, LAUNCH, args, env, NULL, cwd, NULL, 30000, &code, msg, sizeof msg);
    free(line);
    free(env);
    free(cwd);
    if (rc != SBX_OK)
        return rc;
    size_t ml = strlen(msg);
    while (ml && msg[ml - 1] == '\n')
        msg[--ml] = '\0';
    if (code == 127)
        return e2b_error(st, call, SBX_E_NO_COMMAND, "%s: proc_start: %s", prov, msg);
    if (code == 126)
        return e2b_error(st, call, SBX_E_NOT_EXEC, "%s: proc_start: %s", prov, msg);
    if (code != 0)
        return e2b_error(st, call, SBX_E_IO, "%s: proc_start %s failed (exit %d): %s", prov,
                         spec->argv[0], code, msg);
    return SBX_OK;
}

/* A memory source for stdin. */
struct mem_src {
    const unsigned char *p;
    size_t left;
};

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct mem_src *m = ctx;
    size_t n = m->left < cap ? m->left : cap;
    memcpy(buf, m->p, n);
    m->p += n;
    m->left -= n;
    return (long)n;
}

static int64_t mem_length(void *ctx)
{
    return (int64_t)((struct mem_src *)ctx)->left;
}

int e2b_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                   size_t len, uint32_t flags)
{
    struct e2b_state *st = sb->st;
    struct proc_id p;
    int rc = parse_id(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    e2b_keep_alive(sb, call);
    char dir[256];
    proc_dir(id, dir, sizeof dir);
    struct mem_src m = {data, len};
    struct sbx_source src = SBX_SOURCE_INIT(&m, mem_read);
    src.length = mem_length;
    const char *args[] = {dir, (flags & SBX_PROC_WRITE_CLOSE) ? "1" : "0", p.pty ? "1" : "0",
                          NULL};
    char msg[256];
    int code = -1;
    rc = run_script(sb, call, WRITE, args, NULL, &src, "/", NULL, st->cfg.request_timeout_ms,
                    &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc;
    if (code == 2)
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: no process %s in sandbox %s",
                         st->cfg.provider, id, sb->id);
    if (code == 3)
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: proc_write: process %s has ended or its stdin is closed",
                         st->cfg.provider, id);
    if (code != 0)
        return e2b_error(st, call, SBX_E_IO, "%s: proc_write to %s failed (exit %d): %s",
                         st->cfg.provider, id, code, msg);
    return SBX_OK;
}

/* A small file of the process directory into buf (NUL-terminated).
 * *found 0 when it does not exist. */
static int small_file(sbx_sandbox *sb, sbx_call *call, const char *dir, const char *name,
                      char *buf, size_t cap, int *found)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct sbxp_text_sink t;
    sbxp_text_sink_init(&t, buf, cap);
    sbxp_http_error err;
    int rc = e2b_files_get(sb, call, path, &t.sink, &err);
    *found = rc == SBX_OK;
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        return SBX_OK;
    if (rc != SBX_OK)
        return e2b_envd_report(sb, call, &err, "proc_read: reading %s", path);
    return SBX_OK;
}

/* Receives one chunk: skips the bytes before the cursor, keeps at most
 * `want` in hold (a chunk's worth, or NULL to keep nothing), and counts
 * the chunk's size (refusing more than a chunk). The kept bytes reach the
 * caller's sink only once the whole answer arrived, so a cut answer
 * delivers nothing and a read repeated at the same cursor repeats no
 * byte. */
struct chunk_sink {
    unsigned char *hold;
    uint64_t skip, want, got, given, max;
};

static int chunk_write(void *ctx, const void *buf, size_t len)
{
    struct chunk_sink *c = ctx;
    const unsigned char *b = buf;
    if (c->got + len > c->max)
        return SBX_E_PROTOCOL;
    c->got += len;
    if (c->skip >= len) {
        c->skip -= len;
        return 0;
    }
    b += c->skip;
    len -= (size_t)c->skip;
    c->skip = 0;
    size_t n = len < c->want - c->given ? len : (size_t)(c->want - c->given);
    if (n && c->hold)
        memcpy(c->hold + c->given, b, n);
    c->given += n;
    return 0;
}

/* The stream's end now: the head chunk's number and its size (a GET of
 * at most one chunk, left out when a cursor in the head chunk cannot be
 * behind the buffer anyway: *end is then UINT64_MAX). *written 0 when
 * nothing was written yet. */
static int stream_end(sbx_sandbox *sb, sbx_call *call, const char *dir, const char *stream,
                      const struct proc_id *p, uint64_t cursor, uint64_t *end, uint64_t *head,
                      int *written)
{
    char buf[32], hname[16];
    int found;
    snprintf(hname, sizeof hname, "%s.head", stream);
    int rc = small_file(sb, call, dir, hname, buf, sizeof buf, &found);
    if (rc != SBX_OK)
        return rc;
    char *endp;
    unsigned long long h = found ? strtoull(buf, &endp, 10) : 0;
    *written = found && endp != buf;
    *end = *head = 0;
    if (!*written)
        return SBX_OK;
    if ((cursor >> p->shift) >= h && p->buffer >= (UINT64_C(1) << p->shift)) {
        *head = h;
        *end = UINT64_MAX;
        return SBX_OK;
    }
    char path[320];
    snprintf(path, sizeof path, "%s/%s.%09llu", dir, stream, h);
    struct chunk_sink cs = {NULL, UINT64_MAX, 0, 0, 0, UINT64_C(1) << p->shift};
    struct sbx_sink s = SBX_SINK_INIT(&cs, chunk_write);
    sbxp_http_error err;
    rc = e2b_files_get(sb, call, path, &s, &err);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        cs.got = 0; /* named in the head, not made yet */
    else if (rc != SBX_OK && err.from_callback)
        return e2b_error(sb->st, call, SBX_E_PROTOCOL,
                         "%s: proc_read: %s holds more than a chunk", sb->st->cfg.provider,
                         path);
    else if (rc != SBX_OK)
        return e2b_envd_report(sb, call, &err, "proc_read: reading %s", path);
    *head = h;
    *end = ((uint64_t)h << p->shift) + cs.got;
    return SBX_OK;
}

/* Read one stream from *cursor on, up to max bytes, into sink. *lost gets
 * the bytes skipped because they left the buffer (the last p->buffer
 * bytes of what is written when the read starts are kept: a cursor older
 * than that resumes there); *at_end whether the read reached what is
 * written so far. */
static int read_chunks(sbx_sandbox *sb, sbx_call *call, const char *dir, const char *stream,
                       const struct proc_id *p, uint64_t *cursor, uint64_t max,
                       const struct sbx_sink *sink, unsigned char *hold, uint64_t *lost,
                       int *at_end);

static int read_stream(sbx_sandbox *sb, sbx_call *call, const char *dir, const char *stream,
                       const struct proc_id *p, uint64_t *cursor, uint64_t max,
                       const struct sbx_sink *sink, uint64_t *lost, int *at_end)
{
    uint64_t chunk = UINT64_C(1) << p->shift;
    unsigned char *hold = sink ? malloc(chunk) : NULL;
    if (sink && !hold)
        return e2b_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    int rc = read_chunks(sb, call, dir, stream, p, cursor, max, sink, hold, lost, at_end);
    free(hold);
    return rc;
}

static int read_chunks(sbx_sandbox *sb, sbx_call *call, const char *dir, const char *stream,
                       const struct proc_id *p, uint64_t *cursor, uint64_t max,
                       const struct sbx_sink *sink, unsigned char *hold, uint64_t *lost,
                       int *at_end)
{
    struct e2b_state *st = sb->st;
    uint64_t chunk = UINT64_C(1) << p->shift, given = 0;
    *lost = 0;
    *at_end = 0;
    for (int tries = 0;; tries++) {
        if (tries > 8)
            return e2b_error(st, call, SBX_E_IO,
                             "%s: proc_read: %s: the oldest output kept keeps moving",
                             st->cfg.provider, dir);
        uint64_t end, head;
        int written, rc;
        if ((rc = stream_end(sb, call, dir, stream, p, *cursor, &end, &head, &written)) !=
            SBX_OK)
            return rc;
        if (!written || *cursor >= end) {
            *at_end = 1;
            return SBX_OK;
        }
        uint64_t floor = end != UINT64_MAX && end > p->buffer ? end - p->buffer : 0;
        if (*cursor < floor) {
            *lost += floor - *cursor;
            *cursor = floor;
        }
        int dropped = 0;
        while (given < max) {
            uint64_t k = *cursor >> p->shift, off = *cursor & (chunk - 1);
            char path[320];
            snprintf(path, sizeof path, "%s/%s.%09llu", dir, stream, (unsigned long long)k);
            struct chunk_sink cs = {hold, off, max - given, 0, 0, chunk};
            struct sbx_sink s = SBX_SINK_INIT(&cs, chunk_write);
            sbxp_http_error err;
            rc = e2b_files_get(sb, call, path, &s, &err);
            if (rc == SBX_OK && cs.given && sink) {
                int src = sink->write(sink->ctx, hold, (size_t)cs.given);
                if (src != 0)
                    return src; /* the caller's sink said why */
            }
            if (rc == SBX_OK) {
                given += cs.given;
                *cursor += cs.given;
                if (cs.got == chunk && off + cs.given == chunk)
                    continue; /* a full chunk read to its end: the next one */
                *at_end = off + cs.given >= cs.got;
                return SBX_OK;
            }
            if (rc != SBX_OK && given)
                return SBX_OK; /* what came is delivered; the next read meets the error */
            if (err.from_callback) {
                return e2b_error(st, call, SBX_E_PROTOCOL,
                                 "%s: proc_read: %s holds more than a chunk (%llu bytes)",
                                 st->cfg.provider, path, (unsigned long long)chunk);
            }
            if (!(rc == SBX_E_NOT_FOUND && err.http_status == 404))
                return e2b_envd_report(sb, call, &err, "proc_read: reading %s", path);
            if (k >= head) {
                *at_end = 1; /* named in the head, not made yet */
                return SBX_OK;
            }
            if (given) /* dropped while this read went on: the next read says */
                return SBX_OK;
            dropped = 1; /* dropped since the end was looked at: again */
            break;
        }
        if (!dropped)
            return SBX_OK;
    }
}

/* Parse the exit record "<status> <timed out>" into res. */
static void parse_exit(const char *rec, struct sbx_proc_read_result *res)
{
    int status = 0, tf = 0;
    if (sscanf(rec, "%d %d", &status, &tf) < 1)
        status = 255;
    res->state = SBX_PROC_EXITED;
    res->timed_out = tf != 0;
    if (status > 128 && status <= 128 + 64) {
        res->exit_code = -1;
        res->term_signal = status - 128;
    } else {
        res->exit_code = status;
        res->term_signal = 0;
    }
}

/* Sleep ms, or until the call is cancelled (SBX_E_CANCELLED). */
static int nap(struct e2b_state *st, sbx_call *call, int64_t ms)
{
    int fd = call ? st->host->cancel_fd(st->host, call) : -1;
    struct pollfd pf = {fd, POLLIN, 0};
    if (fd >= 0) {
        if (poll(&pf, 1, (int)ms) > 0)
            return SBX_E_CANCELLED;
    } else {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return call && st->host->cancelled(st->host, call) ? SBX_E_CANCELLED : SBX_OK;
}

int e2b_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                  const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    struct e2b_state *st = sb->st;
    struct proc_id p;
    int rc = parse_id(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    char dir[256];
    proc_dir(id, dir, sizeof dir);
    e2b_keep_alive(sb, call);
    uint64_t max = args->max_bytes ? args->max_bytes : (UINT64_C(64) << 10);
    int64_t deadline = sbxs_now_ms() + args->wait_ms;
    int64_t pause = POLL_FIRST_MS;
    int known = 0;
    res->out_cursor = args->out_cursor;
    res->err_cursor = args->err_cursor;
    res->out_lost = res->err_lost = 0;
    for (;;) {
        char rec[64];
        int ended;
        if ((rc = small_file(sb, call, dir, "exit", rec, sizeof rec, &ended)) != SBX_OK)
            return rc;
        if (!ended && !known) {
            char cmd[8];
            int found;
            if ((rc = small_file(sb, call, dir, "cmd", cmd, sizeof cmd, &found)) != SBX_OK)
                return rc;
            if (!found)
                return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: no process %s in sandbox %s",
                                 st->cfg.provider, id, sb->id);
        }
        known = 1;
        uint64_t ol = 0, el = 0, o0 = res->out_cursor, e0 = res->err_cursor;
        int oend = 1, eend = 1;
        rc = read_stream(sb, call, dir, "out", &p, &res->out_cursor, max, args->out, &ol, &oend);
        if (rc == SBX_OK && !p.pty) {
            rc = read_stream(sb, call, dir, "err", &p, &res->err_cursor, max, args->err, &el,
                             &eend);
            if (rc != SBX_OK && res->out_cursor != o0) {
                /* stdout's bytes are delivered: report them, and the next
                 * read meets stderr's failure again. */
                res->out_lost += ol;
                res->err_cursor = e0;
                if (ended)
                    parse_exit(rec, res);
                else
                    res->state = SBX_PROC_RUNNING;
                res->eof = 0;
                return SBX_OK;
            }
        }
        if (rc != SBX_OK)
            return rc;
        res->out_lost += ol;
        res->err_lost += el;
        if (ended)
            parse_exit(rec, res);
        else
            res->state = SBX_PROC_RUNNING;
        int moved = res->out_cursor != o0 || res->err_cursor != e0;
        if (ended) {
            res->eof = oend && eend;
            return SBX_OK;
        }
        if (moved || sbxs_now_ms() >= deadline)
            return SBX_OK;
        int64_t left = deadline - sbxs_now_ms();
        if ((rc = nap(st, call, pause < left ? pause : left)) != SBX_OK)
            return e2b_error(st, call, rc, "%s: proc_read cancelled", st->cfg.provider);
        pause = pause * 2 > POLL_MAX_MS ? POLL_MAX_MS : pause * 2;
    }
}

int e2b_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    struct e2b_state *st = sb->st;
    struct proc_id p;
    int rc = parse_id(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    e2b_keep_alive(sb, call);
    if (signo < 1 || signo > 64)
        return e2b_error(st, call, SBX_E_INVALID, "%s: proc_signal: %d is not a signal",
                         st->cfg.provider, signo);
    char dir[256], sig[8];
    proc_dir(id, dir, sizeof dir);
    snprintf(sig, sizeof sig, "%d", signo);
    const char *args[] = {dir, sig, NULL};
    char msg[256];
    int code = -1;
    rc = run_script(sb, call, SIGNAL, args, NULL, NULL, "/", NULL, 30000, &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc;
    if (code == 2)
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: no process %s in sandbox %s",
                         st->cfg.provider, id, sb->id);
    if (code != 0)
        return e2b_error(st, call, SBX_E_IO, "%s: proc_signal %s failed (exit %d): %s",
                         st->cfg.provider, id, code, msg);
    return SBX_OK;
}

int e2b_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                    uint16_t cols)
{
    struct e2b_state *st = sb->st;
    struct proc_id p;
    int rc = parse_id(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    e2b_keep_alive(sb, call);
    if (!p.pty)
        return e2b_error(st, call, SBX_E_INVALID, "%s: proc_resize: process %s has no PTY",
                         st->cfg.provider, id);
    char dir[256], r[8], c[8];
    proc_dir(id, dir, sizeof dir);
    snprintf(r, sizeof r, "%u", rows);
    snprintf(c, sizeof c, "%u", cols);
    const char *args[] = {dir, r, c, NULL};
    char msg[256];
    int code = -1;
    rc = run_script(sb, call, RESIZE, args, NULL, NULL, "/", NULL, 30000, &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc;
    if (code == 2)
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: no process %s in sandbox %s",
                         st->cfg.provider, id, sb->id);
    if (code == 3)
        return e2b_error(st, call, SBX_E_INVALID, "%s: proc_resize: process %s has ended",
                         st->cfg.provider, id);
    if (code != 0)
        return e2b_error(st, call, SBX_E_IO, "%s: proc_resize %s failed (exit %d): %s",
                         st->cfg.provider, id, code, msg);
    return SBX_OK;
}

/* One entry of the index: "<id>~<R | status_timedout>~<hex command>". */
struct listed {
    char id[SBX_PROC_ID_MAX];
    char state[24];
    char cmd[CMD_LIST_MAX + 1];
};

static int by_id(const void *a, const void *b)
{
    return strcmp(((const struct listed *)a)->id, ((const struct listed *)b)->id);
}

static int unhex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Parse an index entry's name into l; 0 when it is not one of this
 * sandbox's. */
static int parse_listed(sbx_sandbox *sb, const char *name, struct listed *l)
{
    char tag[9];
    sandbox_tag(sb, tag);
    const char *t1 = strchr(name, '~'), *t2 = t1 ? strchr(t1 + 1, '~') : NULL;
    if (strncmp(name, tag, 8) != 0 || !t2 || (size_t)(t1 - name) >= sizeof l->id || (size_t)(t2 - t1 - 1) >= sizeof l->state)
        return 0;
    memcpy(l->id, name, (size_t)(t1 - name));
    l->id[t1 - name] = '\0';
    memcpy(l->state, t1 + 1, (size_t)(t2 - t1 - 1));
    l->state[t2 - t1 - 1] = '\0';
    struct proc_id p;
    if (parse_id(sb, NULL, l->id, &p) != SBX_OK)
        return 0;
    size_t n = 0;
    for (const char *h = t2 + 1; h[0] && h[1] && n < CMD_LIST_MAX; h += 2) {
        int a = unhex(h[0]), b = unhex(h[1]);
        if (a < 0 || b < 0)
            break;
        char c = (char)(a << 4 | b);
        l->cmd[n++] = (unsigned char)c < 0x20 ? ' ' : c;
    }
    l->cmd[n] = '\0';
    while (n && l->cmd[n - 1] == ' ')
        l->cmd[--n] = '\0';
    return 1;
}

/*
 * The listing is one filesystem.ListDir of the index directory: an entry
 * per process whose name says its id, state and command (the supervisor
 * renames it when the process ends), so listing costs one request
 * whatever the number of processes. The answer is one JSON document (at
 * most 8 MiB: some 25 000 processes).
 */
int e2b_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink)
{
    struct e2b_state *st = sb->st;
    e2b_keep_alive(sb, call);
    json_object *body = json_object_new_object(), *doc = NULL;
    if (!body)
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "path", json_object_new_string(PROC_BASE "/.index"));
    json_object_object_add(body, "depth", json_object_new_int(1));
    sbxp_http_error err;
    int rc = e2b_envd_unary(sb, call, "filesystem.Filesystem/ListDir", body, &doc, 1, &err);
    json_object_put(body);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        return SBX_OK; /* no process was ever started */
    if (rc != SBX_OK)
        return e2b_envd_report(sb, call, &err, "proc_list: listing %s/.index", PROC_BASE);
    json_object *entries = NULL;
    json_object_object_get_ex(doc, "entries", &entries);
    size_t n = entries && json_object_is_type(entries, json_type_array)
                   ? json_object_array_length(entries)
                   : 0;
    struct listed *v = n ? calloc(n, sizeof *v) : NULL;
    if (n && !v) {
        json_object_put(doc);
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = sbxp_json_str(json_object_array_get_idx(entries, i), "name");
        if (name && parse_listed(sb, name, &v[m]))
            m++;
    }
    json_object_put(doc);
    if (m) /* v is NULL when the index is empty */
        qsort(v, m, sizeof *v, by_id); /* ids sort in start order */
    rc = SBX_OK;
    for (size_t i = 0; i < m && rc == SBX_OK; i++) {
        struct proc_id p;
        parse_id(sb, NULL, v[i].id, &p);
        struct sbx_proc_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        info.flags = p.pty ? SBX_PROC_PTY : 0;
        info.id = v[i].id;
        info.command = v[i].cmd;
        info.started_ms = p.ms;
        if (!strcmp(v[i].state, "R")) {
            info.state = SBX_PROC_RUNNING;
        } else {
            struct sbx_proc_read_result r;
            memset(&r, 0, sizeof r);
            char rec[24];
            snprintf(rec, sizeof rec, "%s", v[i].state);
            char *us = strchr(rec, '_');
            if (us)
                *us = ' ';
            parse_exit(rec, &r);
            info.state = SBX_PROC_EXITED;
            info.exit_code = r.exit_code;
            info.term_signal = r.term_signal;
        }
        rc = sink->entry(sink->ctx, &info);
    }
    free(v);
    return rc;
}
