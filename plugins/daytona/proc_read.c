/*
 * proc_read.c - a process's output after a cursor (see proc.c for the
 * recorder's segments). One helper command (READ_SH) does the whole read
 * inside the sandbox: it waits there (polling every 20 ms, up to wait_ms)
 * until a stream has bytes after its cursor or the process has ended, then
 * prints, for each stream, the bytes lost (a cursor older than the oldest
 * segment kept resumes at its first byte) and at most max_bytes from the
 * cursor, base64 (the session's JSON answer carries text), read from
 * one segment through a descriptor opened before the bytes are taken, so
 * a segment removed meanwhile is retried, never mistaken for the next
 * one. What crosses the network is bounded by max_bytes per stream (at
 * most one segment), whatever the size of the stream. See daytona.h.
 */
#include "daytona.h"

#include "base64.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most bytes per stream and read. */
#define READ_MAX (64 * 1024)

/* $1 dir, $2 seg, $3 max, $4 out cursor, $5 err cursor, $6 wait ms, $7
 * the buffer size (what is older than the last $7 bytes is lost).
 * Prints "<state> <out end> <err end>" (state: run, dead, or the exit
 * file's "<status>:<timed out>"), then "o <lost> <base64>" and
 * "e <lost> <base64>"; "x" alone when the directory does not exist. */
static const char READ_SH[] =
    "d=$1; S=$2; M=$3; oc=$4; ec=$5; w=$6; W=$7; n=$((w/20)); "
    "while [ ! -d \"$d\" ]; do [ \"$n\" -le 0 ] && { echo x; exit 0; }; n=$((n-1)); sleep 0.02; "
    "done; "
    "num() { v=$1; while [ ${#v} -gt 1 ] && [ \"${v#0}\" != \"$v\" ]; do v=${v#0}; done; }; "
    "seg() { F=0; L=-1; Z=0; E=0; a=; b=; for x in \"$d/$1\".[0-9]*; do [ -e \"$x\" ] || break; "
    "[ -n \"$a\" ] || a=$x; b=$x; done; if [ -n \"$b\" ]; then num \"${a##*.}\"; F=$v; "
    "num \"${b##*.}\"; L=$v; Z=$(wc -c <\"$b\"); E=$((L*S+Z)); fi; }; "
    "while :; do ex=; [ -e \"$d/exit\" ] && read -r ex <\"$d/exit\"; "
    "seg o; OE=$E; seg e; EE=$E; "
    "if [ -z \"$ex\" ] && read -r wp <\"$d/wpid\" 2>/dev/null && ! kill -0 \"$wp\" 2>/dev/null; "
    "then if [ -e \"$d/exit\" ]; then read -r ex <\"$d/exit\"; else ex=dead; fi; "
    "seg o; OE=$E; seg e; EE=$E; fi; "
    "if [ -n \"$ex\" ] || [ \"$OE\" -gt \"$oc\" ] || [ \"$EE\" -gt \"$ec\" ] || [ \"$n\" -le 0 ]; "
    "then break; fi; n=$((n-1)); sleep 0.02; done; "
    "rd() { s=$1; c=$2; lost=0; B=; r=0; while [ $r -lt 20 ]; do r=$((r+1)); seg \"$s\"; "
    "[ \"$L\" -ge 0 ] || break; "
    "lo=$((F*S)); [ $((E-W)) -gt \"$lo\" ] && lo=$((E-W)); "
    "if [ \"$c\" -lt \"$lo\" ]; then lost=$((lost+lo-c)); c=$lo; fi; "
    "k=$((c/S)); [ \"$k\" -le \"$L\" ] || break; x=$d/$s.$(printf %09d \"$k\"); "
    "if B=$( { tail -c +$((c-k*S+1)) <&3 | head -c \"$M\" | base64 -w0; } 2>/dev/null 3<\"$x\" ); "
    "then break; fi; B=; done; printf '%s %s %s\\n' \"$s\" \"$lost\" \"$B\"; }; "
    "printf '%s %s %s\\n' \"${ex:-run}\" \"$OE\" \"$EE\"; rd o \"$oc\"; rd e \"$ec\"";

/* Decode one "<s> <lost> <base64>" line into the sink; *cursor moves. */
static int deliver(struct daytona_state *st, sbx_call *call, const char *line, char want,
                   uint64_t max, const struct sbx_sink *sink, uint64_t *cursor, uint64_t *lost)
{
    unsigned long long l = 0;
    int used = 0;
    if (line[0] != want || sscanf(line + 1, " %llu%n", &l, &used) != 1)
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": proc_read: a malformed answer");
    const char *b = line + 1 + used;
    while (*b == ' ')
        b++;
    size_t bl = strcspn(b, " \r\n");
    /* the answer is the sandbox's: never more than was asked for */
    if (bl > 4 * ((max + 2) / 3) || l > UINT64_MAX - *cursor - max)
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": proc_read: an oversized answer");
    *lost = l;
    *cursor += l;
    if (!bl)
        return SBX_OK;
    unsigned char *raw = malloc(3 * (bl / 4) + 3);
    if (!raw)
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    long n = sbxp_b64_decode(b, bl, raw);
    if (n < 0 || (uint64_t)n > max) {
        free(raw);
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": proc_read: bad base64 in the answer");
    }
    int rc = SBX_OK;
    if (n > 0 && sink && sink->write)
        rc = sink->write(sink->ctx, raw, (size_t)n);
    free(raw);
    if (rc == SBX_OK)
        *cursor += (uint64_t)n;
    return rc; /* a sink's stop: the sink said why */
}

int daytona_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                      const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    struct daytona_state *st = sb->st;
    struct daytona_proc p;
    int rc = daytona_proc_parse(sb, call, id, &p);
    if (rc != SBX_OK)
        return rc;
    uint32_t size = res->size;
    memset(res, 0, sizeof *res);
    res->size = size;
    res->out_cursor = args->out_cursor;
    res->err_cursor = args->err_cursor;
    uint64_t max = args->max_bytes ? args->max_bytes : READ_MAX;
    if (max > READ_MAX)
        max = READ_MAX;
    if (max > p.seg)
        max = p.seg;
    char a_seg[24], a_max[24], a_oc[24], a_ec[24], a_w[16], a_b[24];
    snprintf(a_b, sizeof a_b, "%llu", (unsigned long long)p.buffer);
    snprintf(a_seg, sizeof a_seg, "%llu", (unsigned long long)p.seg);
    snprintf(a_max, sizeof a_max, "%llu", (unsigned long long)max);
    snprintf(a_oc, sizeof a_oc, "%llu", (unsigned long long)args->out_cursor);
    snprintf(a_ec, sizeof a_ec, "%llu", (unsigned long long)args->err_cursor);
    snprintf(a_w, sizeof a_w, "%u", args->wait_ms);
    const char *argv[] = {"sh", "-c", READ_SH, "sbx", p.dir, a_seg, a_max, a_oc, a_ec, a_w, a_b, NULL};
    size_t cap = 2 * (4 * ((size_t)max + 2) / 3) + 512;
    char *out = malloc(cap);
    if (!out)
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    int code = -1;
    char msg[256];
    rc = daytona_exec_small(sb, call, "/", argv, (int64_t)args->wait_ms + st->cfg.request_timeout_ms,
                            &code, out, cap, msg, sizeof msg);
    if (rc == SBX_E_EXISTS)
        rc = daytona_error(st, call, SBX_E_PROTOCOL,
                           DT ": proc_read %s: the answer did not come as text", id);
    if (rc == SBX_OK && code != 0)
        rc = daytona_error(st, call, SBX_E_PROTOCOL, DT ": proc_read %s failed (exit %d): %s", id,
                           code, msg);
    if (rc != SBX_OK) {
        free(out);
        return rc;
    }
    if (out[0] == 'x') {
        free(out);
        /* no directory: still starting, or no such process */
        rc = daytona_proc_session_check(sb, call, id, &p);
        if (rc == SBX_OK)
            res->state = SBX_PROC_RUNNING;
        return rc;
    }
    char *l1 = out, *l2 = strchr(l1, '\n'), *l3 = l2 ? strchr(l2 + 1, '\n') : NULL;
    if (!l2 || !l3) {
        free(out);
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": proc_read %s: a short answer", id);
    }
    *l2++ = '\0';
    *l3++ = '\0';
    char state[40];
    unsigned long long oend = 0, eend = 0;
    if (sscanf(l1, "%39s %llu %llu", state, &oend, &eend) != 3) {
        free(out);
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": proc_read %s: a malformed answer", id);
    }
    rc = deliver(st, call, l2, 'o', max, args->out, &res->out_cursor, &res->out_lost);
    if (rc == SBX_OK)
        rc = deliver(st, call, l3, 'e', max, args->err, &res->err_cursor, &res->err_lost);
    free(out);
    if (rc != SBX_OK)
        return rc;
    int c = 0, t = 0;
    if (!strcmp(state, "run")) {
        res->state = SBX_PROC_RUNNING;
    } else {
        res->state = SBX_PROC_EXITED;
        if (!strcmp(state, "dead")) {
            /* the wrapper was killed (the sandbox restarted, say) */
            res->exit_code = -1;
            res->term_signal = 9;
        } else if (sscanf(state, "%d:%d", &c, &t) == 2) {
            res->timed_out = t != 0;
            if (t || (c > 128 && c <= 128 + 64)) {
                res->exit_code = -1;
                res->term_signal = t ? 9 : c - 128;
            } else {
                res->exit_code = c;
            }
        } else {
            return daytona_error(st, call, SBX_E_PROTOCOL, DT ": proc_read %s: state %s", id,
                                 state);
        }
        res->eof = res->out_cursor >= oend && res->err_cursor >= eend;
    }
    return SBX_OK;
}
