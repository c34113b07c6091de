/*
 * proc.c - processes that outlive the call (SBX_CAP_PROCESSES) and their
 * pseudo-terminals (SBX_CAP_PTY), through the toolbox's process sessions.
 *
 * One process is one session, sbx-proc-<id>, running one asynchronous
 * command (POST /process/session/{sid}/exec {runAsync:true}): a POSIX sh
 * wrapper (WRAP_SH) that lives in the sandbox with the process, so a host
 * process that attaches later finds everything there:
 *
 *   /tmp/.sbx-proc-<hex>/   (mode 0700)
 *     o.NNNNNNNNN e.NNN...  the replay buffer: stdout and stderr, each cut
 *                           by GNU split into segments of `seg` bytes
 *                           numbered from 0 (segment n holds the stream's
 *                           bytes n*seg ..); starting segment n removes
 *                           segment n-keep-1, so at least keep*seg >= the
 *                           buffer size is always kept and at most
 *                           (keep+1)*seg is on disk, however fast the
 *                           process writes. A read sees exactly the last
 *                           `buffer` bytes; a cursor older than that is
 *                           counted as lost, exactly.
 *     in.<ns>.<rand>, eof   stdin chunks uploaded by proc_write and the
 *                           close marker; a feeder loop writes the chunks
 *                           into the process's stdin FIFO in name order
 *     pid, wpid, lpid, tty  the process group, the wrapper, the PTY leader
 *     exit                  "<status>:<timed out>" once all output is on disk
 *
 * The toolbox's own log of a session command is unbounded and text only
 * (JSON strings), and its input endpoint takes text and cannot close
 * stdin, so neither is used: the command's logs stay empty.
 *
 * A PTY is made in the sandbox by util-linux script(1) (script -qfec CMD
 * /dev/null): the command is the session leader of a new pseudo-terminal,
 * its output the recorder's stdout stream. The toolbox's PTY sessions
 * (POST /process/pty, WebSocket /process/pty/{id}/connect) keep no
 * history: their output reaches only a client connected at the time, so a
 * host process that attaches later could not replay it. Resizing runs
 * stty -F on the terminal (the kernel sends SIGWINCH to its foreground
 * group); a signal goes to the terminal's foreground group, read from
 * /proc/<leader>/stat.
 *
 * A process id is "<key hash 12>.<hex 12>.<start ms>.<seg>.<buffer>.<t|p>":
 * the session's key hash prefix (an id of another session is refused
 * without a request), the random name of its session and directory, its
 * start time (list order), its recorder's geometry and whether it has a
 * PTY. See daytona.h.
 */

#include "daytona.h"

#include "hex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SID_PREFIX "sbx-proc-"
#define DIR_PREFIX "/tmp/.sbx-proc-"
#define KH_LEN 12
#define CMD_VAR "SBX_PROC_CMD"
#define CMD_SHOWN 240

/* $1 dir, $2 cwd, $3 seg, $4 keep, $5 t|p, $6 rows, $7 cols, $8 timeout ms,
 * $9 the command quoted (for script), then the command's words. */
static const char WRAP_SH[] =
    "d=$1; cw=$2; S=$3; K=$4; f=$5; R=$6; C=$7; T=$8; qc=$9; shift 9; "
    "exec </dev/null >/dev/null 2>&1; "
    "mkdir -p \"$d\" && chmod 700 \"$d\" || exit 125; echo $$ >\"$d/wpid\"; "
    "mkfifo \"$d/i.p\" \"$d/o.p\" \"$d/e.p\" || exit 125; export K; "
    "F='n=${FILE##*.}; while [ ${#n} -gt 1 ] && [ \"${n#0}\" != \"$n\" ]; do n=${n#0}; done; "
    "o=$((n-K-1)); [ \"$o\" -ge 0 ] && rm -f \"${FILE%.*}.$(printf %09d \"$o\")\"; "
    "exec cat >\"$FILE\"'; "
    "split -b \"$S\" -a 9 -d --filter=\"$F\" - \"$d/o.\" <\"$d/o.p\" & ro=$!; "
    "split -b \"$S\" -a 9 -d --filter=\"$F\" - \"$d/e.\" <\"$d/e.p\" & re=$!; "
    "( exec 3>\"$d/i.p\"; i=0; while :; do set -- \"$d\"/in.*; "
    "if [ -e \"$1\" ]; then for x; do cat -- \"$x\" >&3 || exit 0; rm -f -- \"$x\"; done; i=0; "
    "elif [ \"$f\" != p ] && [ -e \"$d/eof\" ]; then set -- \"$d\"/in.*; [ -e \"$1\" ] || exit 0; "
    "else i=$((i+1)); if [ $i -lt 50 ]; then sleep 0.01; elif [ $i -lt 100 ]; then sleep 0.05; "
    "else sleep 0.2; fi; fi; done ) & fp=$!; "
    "if cd \"$cw\"; then "
    "if [ \"$f\" = p ]; then "
    "TERM=xterm-256color SHELL=/bin/sh setsid env --default-signal script -qfec "
    "\"stty rows $R cols $C; tty >$d/tty; echo \\$\\$ >$d/lpid; exec $qc\" /dev/null "
    "<\"$d/i.p\" >\"$d/o.p\" 2>\"$d/e.p\" & p=$!; "
    "else setsid env --default-signal \"$@\" <\"$d/i.p\" >\"$d/o.p\" 2>\"$d/e.p\" & p=$!; fi; "
    "echo \"$p\" >\"$d/pid\"; tw=; "
    "if [ \"$T\" -gt 0 ]; then ( sleep \"$((T/1000)).$(printf %03d $((T%1000)))\" & "
    "echo $! >\"$d/tw\"; wait $!; : >\"$d/timedout\"; kill -9 -\"$p\" ) & tw=$!; fi; "
    "wait \"$p\"; c=$?; "
    "if [ -n \"$tw\" ]; then kill \"$tw\"; read -r s <\"$d/tw\" && kill \"$s\"; fi; "
    "kill -9 -\"$p\"; "
    "else c=125; printf 'cwd %s does not exist\\n' \"$cw\" >\"$d/e.p\"; : >\"$d/o.p\"; fi; "
    "kill \"$fp\"; wait \"$ro\"; wait \"$re\"; t=0; [ -e \"$d/timedout\" ] && t=1; "
    "echo \"$c:$t\" >\"$d/exit.t\" && mv -f \"$d/exit.t\" \"$d/exit\"; exit \"$c\"";

/* $1 dir, $2 signal, $3 t|p: to the process group, or the terminal's
 * foreground group; an ended process is left alone (exit 0). */
static const char SIGNAL_SH[] =
    "d=$1; s=$2; i=0; w=pid; [ \"$3\" = p ] && w=lpid; "
    "while [ ! -s \"$d/$w\" ] && [ ! -e \"$d/exit\" ] && [ $i -lt 200 ]; do sleep 0.01; "
    "i=$((i+1)); done; [ -d \"$d\" ] || exit 3; [ -e \"$d/exit\" ] && exit 0; g=; "
    "if [ \"$3\" = p ] && read -r lp <\"$d/lpid\" && read -r x <\"/proc/$lp/stat\"; then "
    "x=${x##*) }; set -- $x; g=$6; fi; "
    "if [ -z \"$g\" ] || [ \"$g\" -le 0 ]; then read -r g <\"$d/pid\" || exit 0; "
    /* a process just started may not have its own group yet (setsid), or
     * still ignore SIGINT and SIGQUIT as a background job does until env
     * --default-signal ran: wait for both, briefly */
    "i=0; while [ $i -lt 200 ] && [ ! -e \"$d/exit\" ]; do ok=; "
    "if kill -0 -\"$g\" 2>/dev/null; then ok=1; while read -r k v; do "
    "[ \"$k\" = SigIgn: ] && case $v in *[2367abefABEF]) ok=;; esac; done <\"/proc/$g/status\"; fi; "
    "[ -n \"$ok\" ] && break; sleep 0.01; i=$((i+1)); done; fi; "
    "kill -\"$s\" -\"$g\" 2>/dev/null; exit 0";

/* $1 dir, $2 rows, $3 cols: the terminal's size (SIGWINCH follows). */
static const char RESIZE_SH[] =
    "d=$1; i=0; while [ ! -s \"$d/tty\" ] && [ ! -e \"$d/exit\" ] && [ $i -lt 200 ]; do "
    "sleep 0.01; i=$((i+1)); done; [ -d \"$d\" ] || exit 3; [ -e \"$d/exit\" ] && exit 0; "
    "read -r t <\"$d/tty\" || exit 3; stty -F \"$t\" rows \"$2\" cols \"$3\"";

/* ---- ids -------------------------------------------------------------- */

static int all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* A decimal field up to '.', or to the end when last. */
static int field(const char **p, uint64_t *v, int last)
{
    char *end;
    if (**p < '0' || **p > '9')
        return -1;
    unsigned long long x = strtoull(*p, &end, 10);
    if ((last && *end) || (!last && *end != '.') || end - *p > 19)
        return -1;
    *v = x;
    *p = last ? end : end + 1;
    return 0;
}

/* 0 when id is a process id of the session whose key hash is kh. */
static int parse_id(const char *id, const char *kh, struct daytona_proc *p)
{
    memset(p, 0, sizeof *p);
    size_t n = id ? strnlen(id, SBX_PROC_ID_MAX) : 0;
    if (n == 0 || n >= SBX_PROC_ID_MAX || n < KH_LEN + 14 || !all_hex(id, KH_LEN) ||
        id[KH_LEN] != '.' || !all_hex(id + KH_LEN + 1, 12) || id[KH_LEN + 13] != '.' ||
        strncmp(id, kh, KH_LEN) != 0)
        return -1;
    const char *q = id + KH_LEN + 14;
    uint64_t start, seg, buf;
    if (field(&q, &start, 0) || field(&q, &seg, 0) || field(&q, &buf, 0) ||
        (q[0] != 't' && q[0] != 'p') || q[1] != '\0')
        return -1;
    if (seg < 4096 || seg > (UINT64_C(1) << 30) || buf < 1 || buf > (UINT64_C(1) << 30) ||
        (buf + seg - 1) / seg > 1024)
        return -1;
    uint64_t keep = (buf + seg - 1) / seg;
    p->pty = q[0] == 'p';
    memcpy(p->hex, id + KH_LEN + 1, 12);
    p->hex[12] = '\0';
    snprintf(p->sid, sizeof p->sid, SID_PREFIX "%s", id);
    snprintf(p->dir, sizeof p->dir, DIR_PREFIX "%s", p->hex);
    p->seg = seg;
    p->keep = (unsigned)keep;
    p->buffer = buf;
    p->started_ms = (int64_t)start;
    return 0;
}

int daytona_proc_parse(sbx_sandbox *sb, sbx_call *call, const char *id, struct daytona_proc *p)
{
    /* Not this session's (another key's prefix), or not an id at all: the
     * same answer. */
    if (parse_id(id, sb->key_hash, p) != 0) {
        size_t n = id ? strnlen(id, 64) : 0;
        int clean = 1;
        for (size_t i = 0; i < n; i++)
            clean &= (unsigned char)id[i] > 0x20 && (unsigned char)id[i] < 0x7f;
        return daytona_error(sb->st, call, SBX_E_NOT_FOUND, DT ": no process %.*s in sandbox %s",
                             clean ? (int)n : 0, clean && id ? id : "", sb->id);
    }
    return SBX_OK;
}

int daytona_proc_session_check(sbx_sandbox *sb, sbx_call *call, const char *id,
                               const struct daytona_proc *p)
{
    char path[200];
    snprintf(path, sizeof path, "/process/session/%s", p->sid);
    sbxp_http_error err;
    int rc = daytona_tb_json(sb, call, "GET", path, NULL, NULL, 1, sb->st->cfg.request_timeout_ms,
                             &err);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        return daytona_error(sb->st, call, SBX_E_NOT_FOUND, DT ": no process %s in sandbox %s",
                             id, sb->id);
    if (rc != SBX_OK)
        return daytona_tb_report(sb, call, &err, "looking up process %s", id);
    return SBX_OK;
}

/* ---- start ------------------------------------------------------------ */

/* argv joined by spaces, line breaks made spaces, cut (malloc'd). */
static char *shown(const char *const *argv)
{
    char *s = malloc(CMD_SHOWN + 1);
    if (!s)
        return NULL;
    size_t len = 0;
    for (size_t i = 0; argv[i] && len < CMD_SHOWN; i++) {
        if (i)
            s[len++] = ' ';
        for (const char *c = argv[i]; *c && len < CMD_SHOWN; c++)
            s[len++] = (*c == '\n' || *c == '\r') ? ' ' : *c;
    }
    /* do not end inside a UTF-8 sequence */
    while (len > 0 && ((unsigned char)s[len - 1] & 0xc0) == 0x80)
        len--;
    if (len > 0 && (unsigned char)s[len - 1] >= 0xc0)
        len--;
    s[len] = '\0';
    return s;
}

static int quote_all(char **b, size_t *len, size_t *cap, const char *const *env,
                     const char *const *argv)
{
    if (env) {
        if (daytona_sh_quote(b, len, cap, "env") || daytona_sh_quote(b, len, cap, "--"))
            return -1;
        for (size_t i = 0; env[i]; i++)
            if (strchr(env[i], '=') && daytona_sh_quote(b, len, cap, env[i]))
                return -1;
    }
    for (size_t i = 0; argv[i]; i++)
        if (daytona_sh_quote(b, len, cap, argv[i]))
            return -1;
    return 0;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int daytona_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                       char id[SBX_PROC_ID_MAX])
{
    struct daytona_state *st = sb->st;
    id[0] = '\0';
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return daytona_error(st, call, SBX_E_INVALID, DT ": proc_start: empty argv");
    if (spec->flags & ~SBX_PROC_PTY)
        return daytona_error(st, call, SBX_E_INVALID, DT ": proc_start: unknown flags %#x",
                             spec->flags & ~SBX_PROC_PTY);
    if (spec->timeout_ms < 0)
        return daytona_error(st, call, SBX_E_INVALID, DT ": proc_start: negative timeout");
    int pty = (spec->flags & SBX_PROC_PTY) != 0;
    unsigned rows = spec->rows ? spec->rows : 24, cols = spec->cols ? spec->cols : 80;
    uint64_t buf = spec->buffer_bytes ? spec->buffer_bytes : (uint64_t)st->cfg.proc_buffer;
    if (buf > (UINT64_C(1) << 30))
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": proc_start: a replay buffer over 1 GiB");
    /* 16 segments (of at least 4 KiB) hold the buffer */
    uint64_t seg = (buf + 15) / 16;
    seg = (seg + 4095) / 4096 * 4096;
    unsigned keep = (unsigned)((buf + seg - 1) / seg);
    int rc = daytona_exec_check_text(st, call, spec->cwd, spec->argv, spec->env);
    if (rc != SBX_OK)
        return rc;
    char *cwd = NULL;
    if (spec->cwd && *spec->cwd) {
        int type;
        rc = daytona_resolve(sb, call, "proc_start cwd", spec->cwd, 1, &cwd, &type);
        if (rc != SBX_OK)
            return rc;
        if (type != DT_FT_DIR) {
            free(cwd);
            return daytona_error(st, call, SBX_E_INVALID,
                                 DT ": proc_start: cwd %s is not a directory", spec->cwd);
        }
    }
    struct daytona_proc p;
    char hex[13];
    sbxs_random_hex(hex, 6);
    char myid[SBX_PROC_ID_MAX];
    snprintf(myid, sizeof myid, "%.*s.%s.%lld.%llu.%llu.%c", KH_LEN, sb->key_hash, hex,
             (long long)wall_ms(), (unsigned long long)seg, (unsigned long long)buf,
             pty ? 'p' : 't');
    rc = daytona_proc_parse(sb, call, myid, &p);
    if (rc != SBX_OK) {
        free(cwd);
        return rc;
    }

    char *qc = NULL, *cmd = NULL, *disp = shown(spec->argv);
    size_t ql = 0, qcap = 0, cl = 0, ccap = 0;
    char nums[6][24];
    snprintf(nums[0], sizeof nums[0], "%llu", (unsigned long long)seg);
    snprintf(nums[1], sizeof nums[1], "%u", keep);
    snprintf(nums[2], sizeof nums[2], "%u", rows);
    snprintf(nums[3], sizeof nums[3], "%u", cols);
    snprintf(nums[4], sizeof nums[4], "%lld", (long long)spec->timeout_ms);
    int bad = !disp || quote_all(&qc, &ql, &qcap, spec->env, spec->argv);
    if (!bad) {
        /* CMD_VAR='<shown>' first: proc_list reads it back from the
         * session's command. */
        size_t dl = 0, dc = 0;
        char *dq = NULL;
        bad = daytona_sh_quote(&dq, &dl, &dc, disp);
        if (!bad) {
            ccap = dl + 64;
            cmd = malloc(ccap);
            bad = !cmd;
            if (cmd)
                cl = (size_t)snprintf(cmd, ccap, CMD_VAR "=%s", dq);
        }
        free(dq);
    }
    const char *words[] = {"sh", "-c", WRAP_SH, "sbx", p.dir, cwd ? cwd : st->cfg.workspace,
                           nums[0], nums[1], pty ? "p" : "t", nums[2], nums[3], nums[4], qc,
                           NULL};
    for (size_t i = 0; !bad && words[i]; i++)
        bad = daytona_sh_quote(&cmd, &cl, &ccap, words[i]);
    if (!bad)
        bad = quote_all(&cmd, &cl, &ccap, spec->env, spec->argv);
    free(qc);
    free(disp);
    free(cwd);
    if (bad) {
        free(cmd);
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    }

    rc = daytona_tb_session_create(sb, call, p.sid, spec->argv[0]);
    if (rc != SBX_OK) {
        free(cmd);
        return rc;
    }
    json_object *body = json_object_new_object();
    json_object_object_add(body, "command", json_object_new_string(cmd));
    json_object_object_add(body, "runAsync", json_object_new_boolean(1));
    free(cmd);
    char path[200];
    snprintf(path, sizeof path, "/process/session/%s/exec", p.sid);
    json_object *doc = NULL;
    sbxp_http_error err;
    rc = daytona_tb_json(sb, call, "POST", path, body, &doc, 0, st->cfg.request_timeout_ms, &err);
    json_object_put(body);
    if (rc == SBX_OK && !sbxp_json_str(doc, "cmdId"))
        rc = daytona_error(st, call, SBX_E_PROTOCOL,
                           DT ": proc_start: the session answered without a command id");
    else if (rc != SBX_OK)
        rc = daytona_tb_report(sb, call, &err, "proc_start %s", spec->argv[0]);
    json_object_put(doc);
    if (rc != SBX_OK) {
        daytona_tb_session_delete(sb, p.sid);
        return rc;
    }
    snprintf(id, SBX_PROC_ID_MAX, "%s", myid);
    return SBX_OK;
}

/* ---- write ------------------------------------------------------------ */

/* Which of exit and eof the process's directory holds; SBX_E_NOT_FOUND
 * (not reported) when it has no directory. */
static int dir_marks(sbx_sandbox *sb, sbx_call *call, const struct daytona_proc *p,
                     int *ended, int *closed, sbxp_http_error *err)
{
    *ended = *closed = 0;
    char *q = daytona_tb_query("/files", "path", p->dir, NULL, NULL);
    if (!q)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object *doc = NULL;
    int rc = daytona_tb_json(sb, call, "GET", q, NULL, &doc, 1, sb->st->cfg.request_timeout_ms, err);
    free(q);
    if (rc == SBX_OK && doc && json_object_is_type(doc, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(doc); i++) {
            const char *n = sbxp_json_str(json_object_array_get_idx(doc, i), "name");
            *ended |= n && !strcmp(n, "exit");
            *closed |= n && !strcmp(n, "eof");
        }
    }
    json_object_put(doc);
    return rc;
}

int daytona_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                       size_t len, uint32_t flags)
{
    struct daytona_state *st = sb->st;
    struct daytona_proc p;
    int rc = daytona_proc_parse(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    if (flags & ~SBX_PROC_WRITE_CLOSE)
        return daytona_error(st, call, SBX_E_INVALID, DT ": proc_write: unknown flags %#x",
                             flags & ~SBX_PROC_WRITE_CLOSE);
    int ended, closed;
    sbxp_http_error err;
    rc = dir_marks(sb, call, &p, &ended, &closed, &err);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404) {
        /* no directory yet (the wrapper is starting), or no such process */
        rc = daytona_proc_session_check(sb, call, id, &p);
        if (rc != SBX_OK)
            return rc;
    } else if (rc != SBX_OK) {
        return daytona_tb_report(sb, call, &err, "proc_write %s", id);
    }
    if (ended)
        return daytona_error(st, call, SBX_E_INVALID, DT ": proc_write: process %s has ended", id);
    if (closed)
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": proc_write: the stdin of process %s is closed", id);
    static const char eot = 4; /* a terminal's EOF character (^D) */
    if ((flags & SBX_PROC_WRITE_CLOSE) && p.pty && len == 0) {
        data = &eot;
        len = 1;
    }
    char tmp[128], name[128], rnd[17];
    if (len) {
        /* under a temporary name, then renamed: the feeder never sees a
         * part of a chunk */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        sbxs_random_hex(rnd, 8);
        snprintf(tmp, sizeof tmp, "%s/.up.%s", p.dir, rnd);
        snprintf(name, sizeof name, "%s/in.%020lld.%s", p.dir,
                 (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, rnd);
        rc = daytona_tb_upload_mem(sb, call, tmp, data, len, &err);
        if (rc == SBX_OK)
            rc = daytona_tb_move(sb, call, tmp, name, &err);
        if (rc != SBX_OK) {
            if (err.from_callback)
                return rc;
            rc = daytona_tb_report(sb, call, &err, "proc_write %s", id);
            sbxp_http_error e2;
            daytona_tb_remove(sb, NULL, tmp, 0, &e2);
            return rc;
        }
        if (p.pty && (flags & SBX_PROC_WRITE_CLOSE) && data != &eot) {
            /* the ^D after the data, published by a rename as well: the
             * feeder must never cat (and delete) a chunk still empty */
            snprintf(tmp, sizeof tmp, "%s/.up.%s.eot", p.dir, rnd);
            snprintf(name, sizeof name, "%s/in.%020lld.%s.eot", p.dir,
                     (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, rnd);
            rc = daytona_tb_upload_mem(sb, call, tmp, &eot, 1, &err);
            if (rc == SBX_OK)
                rc = daytona_tb_move(sb, call, tmp, name, &err);
            if (rc != SBX_OK)
                return daytona_tb_report(sb, call, &err, "proc_write %s: the EOF character", id);
        }
    }
    if (flags & SBX_PROC_WRITE_CLOSE) {
        snprintf(tmp, sizeof tmp, "%s/eof", p.dir);
        rc = daytona_tb_upload_mem(sb, call, tmp, "", 0, &err);
        if (rc != SBX_OK)
            return daytona_tb_report(sb, call, &err, "proc_write %s: closing stdin", id);
    }
    return SBX_OK;
}

/* ---- signal, resize --------------------------------------------------- */

static int helper(sbx_sandbox *sb, sbx_call *call, const char *id, const char *what,
                  const char *const *argv, const struct daytona_proc *p)
{
    int code = -1;
    char msg[256];
    int rc = daytona_exec_helper(sb, call, "/", argv, NULL, sb->st->cfg.request_timeout_ms, &code,
                                 msg, sizeof msg);
    if (rc != SBX_OK)
        return rc;
    if (code == 3) {
        rc = daytona_proc_session_check(sb, call, id, p);
        return rc != SBX_OK ? rc : SBX_OK; /* still starting: nothing to act on yet */
    }
    if (code != 0)
        return daytona_error(sb->st, call, SBX_E_IO, DT ": %s %s failed (exit %d): %s", what, id,
                             code, msg);
    return SBX_OK;
}

int daytona_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    struct daytona_proc p;
    int rc = daytona_proc_parse(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    if (signo < 1 || signo > 64 || signo == 32 || signo == 33)
        return daytona_error(sb->st, call, SBX_E_INVALID, DT ": proc_signal: unknown signal %d",
                             signo);
    char s[8];
    snprintf(s, sizeof s, "%d", signo);
    const char *argv[] = {"sh", "-c", SIGNAL_SH, "sbx", p.dir, s, p.pty ? "p" : "t", NULL};
    return helper(sb, call, id, "proc_signal", argv, &p);
}

int daytona_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                        uint16_t cols)
{
    struct daytona_proc p;
    int rc = daytona_proc_parse(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    if (!p.pty)
        return daytona_error(sb->st, call, SBX_E_INVALID,
                             DT ": proc_resize: process %s has no terminal", id);
    if (rows == 0 || cols == 0)
        return daytona_error(sb->st, call, SBX_E_INVALID,
                             DT ": proc_resize: %ux%u is not a terminal size", (unsigned)rows,
                             (unsigned)cols);
    char r[8], c[8];
    snprintf(r, sizeof r, "%u", (unsigned)rows);
    snprintf(c, sizeof c, "%u", (unsigned)cols);
    const char *argv[] = {"sh", "-c", RESIZE_SH, "sbx", p.dir, r, c, NULL};
    return helper(sb, call, id, "proc_resize", argv, &p);
}

/* ---- list ------------------------------------------------------------- */

struct listed {
    char id[SBX_PROC_ID_MAX];
    char command[CMD_SHOWN + 1];
    int64_t started;
    int pty, exited, code;
};

/* The text of CMD_VAR='...' at the start of the session's command. */
static void shown_of(const char *cmd, char *out, size_t cap)
{
    static const char pre[] = CMD_VAR "='";
    size_t len = 0;
    out[0] = '\0';
    if (!cmd || strncmp(cmd, pre, sizeof pre - 1) != 0)
        return;
    for (const char *c = cmd + sizeof pre - 1; *c && len + 1 < cap;) {
        if (*c == '\'') {
            if (!strncmp(c, "'\\''", 4)) {
                out[len++] = '\'';
                c += 4;
                continue;
            }
            break;
        }
        out[len++] = *c++;
    }
    out[len] = '\0';
}

/* The exit files of every process directory, "<hex> <status>:<t>" a line:
 * the wrapper writes its exit file before the session's command ends, so
 * a process a read saw end is listed ended too. */
static const char EXITS_SH[] =
    "for d in " DIR_PREFIX "*; do [ -e \"$d/exit\" ] || continue; read -r x <\"$d/exit\" && "
    "printf '%s %s\\n' \"${d##*-}\" \"$x\"; done; exit 0";

/* The status in exits for hex (set *code, return 1), else 0. */
static int exit_of(const char *exits, const char *hex, int *code)
{
    for (const char *l = exits; l && *l;) {
        const char *nl = strchr(l, '\n');
        int c = 0, t = 0;
        if (!strncmp(l, hex, 12) && l[12] == ' ' && sscanf(l + 13, "%d:%d", &c, &t) == 2) {
            *code = t ? 128 + 9 : c;
            return 1;
        }
        l = nl ? nl + 1 : NULL;
    }
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const struct listed *x = a, *y = b;
    return x->started < y->started ? -1 : x->started > y->started ? 1 : strcmp(x->id, y->id);
}

int daytona_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink)
{
    struct daytona_state *st = sb->st;
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = daytona_tb_json(sb, call, "GET", "/process/session", NULL, &doc, 1,
                             st->cfg.request_timeout_ms, &err);
    if (rc != SBX_OK) {
        json_object_put(doc);
        return daytona_tb_report(sb, call, &err, "proc_list");
    }
    size_t n = doc && json_object_is_type(doc, json_type_array) ? json_object_array_length(doc) : 0;
    struct listed *v = n ? calloc(n, sizeof *v) : NULL;
    if (n && !v) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    /* the exit files, when they fit a small answer (else the sessions'
     * exit codes alone) */
    char *exits = n ? malloc(64 * 1024) : NULL;
    if (exits) {
        const char *argv[] = {"sh", "-c", EXITS_SH, NULL};
        int code = -1;
        if (daytona_exec_small(sb, NULL, "/", argv, st->cfg.request_timeout_ms, &code, exits,
                               64 * 1024, NULL, 0) != SBX_OK ||
            code != 0)
            exits[0] = '\0';
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(doc, i);
        const char *sid = sbxp_json_str(s, "sessionId");
        struct daytona_proc p;
        if (!sid || strncmp(sid, SID_PREFIX, sizeof SID_PREFIX - 1) != 0 ||
            parse_id(sid + sizeof SID_PREFIX - 1, sb->key_hash, &p) != 0)
            continue;
        json_object *cmds = NULL;
        json_object_object_get_ex(s, "commands", &cmds);
        json_object *c0 = cmds && json_object_is_type(cmds, json_type_array) &&
                                  json_object_array_length(cmds) > 0
                              ? json_object_array_get_idx(cmds, 0)
                              : NULL;
        struct listed *e = &v[k++];
        snprintf(e->id, sizeof e->id, "%s", sid + sizeof SID_PREFIX - 1);
        shown_of(sbxp_json_str(c0, "command"), e->command, sizeof e->command);
        json_object *ec = NULL;
        e->exited = c0 && json_object_object_get_ex(c0, "exitCode", &ec) &&
                    json_object_is_type(ec, json_type_int);
        e->code = e->exited ? json_object_get_int(ec) : 0;
        int code;
        if (exit_of(exits, p.hex, &code)) {
            e->exited = 1;
            e->code = code;
        }
        e->pty = p.pty;
        e->started = p.started_ms;
    }
    json_object_put(doc);
    free(exits);
    if (k)
        qsort(v, k, sizeof *v, by_start); /* v is NULL when empty */
    rc = SBX_OK;
    for (size_t i = 0; i < k && rc == SBX_OK; i++) {
        struct sbx_proc_info info = {.size = sizeof info};
        info.flags = v[i].pty ? SBX_PROC_PTY : 0;
        info.id = v[i].id;
        info.command = v[i].command;
        info.state = v[i].exited ? SBX_PROC_EXITED : SBX_PROC_RUNNING;
        if (v[i].exited && v[i].code > 128 && v[i].code <= 128 + 64) {
            info.exit_code = -1;
            info.term_signal = v[i].code - 128;
        } else {
            info.exit_code = v[i].exited ? v[i].code : 0;
        }
        info.started_ms = v[i].started;
        rc = sink->entry(sink->ctx, &info);
    }
    free(v);
    return rc;
}
