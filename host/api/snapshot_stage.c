/*
 * snapshot_stage.c - a restore's staging directory in the workspace root,
 * the swap that puts the staged tree in place, and the roll-back of a
 * restore whose process ended half-way; and sbxh_snapshot_script, the one
 * way snapshot.c, snapshot_restore.c and this file run a command in the
 * sandbox (here, the lowest of the three, so that calls go one way).
 *
 * The workspace root itself cannot be renamed (on docker it is the
 * container's /workspace, with skills/ bound read-only inside it), so a
 * restore works in a hidden directory beside the entries it replaces, on
 * the same filesystem (moves are renames):
 *
 *   .sbx-restore.<realm>.<pid>.<start>.<random>/
 *       new/    the snapshot, extracted (checked entry by entry)
 *       old/    the workspace's entries, once the swap moved them away
 *       moved   written once every old entry is in old/ (then the root
 *               holds nothing but staged entries, skills and stages)
 *       done    written once every staged entry is in the root
 *
 * Until `done` the restore has not happened: a failure, or the next restore
 * or snapshot after the process was killed, moves the root's staged entries
 * back (with `moved`), then old/'s entries up, and drops the stage; data of
 * the workspace is only ever renamed, never removed, until `done`. The name
 * says whose stage it is (process_id.h), so only a stage whose process is
 * certainly gone is rolled back by another process. Everything runs as
 * `sh` in the sandbox through exec (DESIGN §5: provider operations only).
 */
#include "api/snapshot_internal.h"
#include "api/exec_quiet.h"

#include "hex.h"
#include "base/process_id.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- commands in the sandbox (save, restore and staging) ---------------- */

int sbxh_snapshot_script(sbx_handle *h, const char *what, const char *script,
                         const char *arg1, const char *arg2, const struct sbx_sink *out,
                         const struct sbx_source *in, sbx_cancel *cancel, sbx_error *err)
{
    const char *argv[] = {"sh", "-c", script, "sh", arg1, arg2, NULL};
    if (!arg1)
        argv[3] = NULL;
    char detail[600];
    int rc = sbxh_exec_quiet(h, argv, out, in, cancel, detail, sizeof detail);
    return rc == SBX_OK ? SBX_OK
                        : sbx_error_set(err, rc, "%s in the sandbox failed: %s", what,
                                        detail);
}

/* The entries a restore replaces: all of the root but skills and stages.
 * ($1 is the stage.) */
#define EACH_ROOT_ENTRY                                  \
    "for f in * .[!.]* ..?*; do\n"                       \
    "  { [ -e \"$f\" ] || [ -L \"$f\" ]; } || continue\n" \
    "  case $f in skills|" SBX_SNAPSHOT_STAGE_PREFIX "*) continue;; esac\n"


/* $2 (test builds only) "kill-mid-swap": the script dies after its first
 * staged entry moved in, as a killed restore would. */
static const char swap_script[] =
    "S=$1\n"
    "[ -d \"$S/new\" ] && [ -d \"$S/old\" ] || { echo \"$S is incomplete\" >&2; exit 1; }\n"
    "if [ ! -e \"$S/moved\" ]; then\n"
    EACH_ROOT_ENTRY
    "  mv -- \"$f\" \"$S/old/\" || exit 1\n"
    "done\n"
    ": > \"$S/moved\" || exit 1\n"
    "fi\n"
    "for f in \"$S\"/new/* \"$S\"/new/.[!.]* \"$S\"/new/..?*; do\n"
    "  { [ -e \"$f\" ] || [ -L \"$f\" ]; } || continue\n"
    "  b=${f##*/}\n"
    "  if [ -e \"$b\" ] || [ -L \"$b\" ]; then echo \"$b appeared in the workspace "
    "during the restore\" >&2; exit 1; fi\n"
    "  mv -- \"$f\" . || exit 1\n"
    "  [ \"$2\" = kill-mid-swap ] && kill -9 $$\n"
    "done\n"
    ": > \"$S/done\" || exit 1\n"
    "rm -rf -- \"$S\"\n"
    "exit 0\n";

/* Undo stage $1: the root's staged entries back into new/ (only with
 * `moved`: before it the root's entries are the workspace's own), `moved`
 * dropped so that a rerun does not take the workspace's entries for staged
 * ones, old/'s entries up; the stage goes only when old/ is empty. */
static const char rollback_script[] =
    "S=$1\n"
    "[ -d \"$S\" ] || exit 0\n"
    "if [ -e \"$S/done\" ]; then rm -rf -- \"$S\"; exit 0; fi\n"
    "if [ -e \"$S/moved\" ]; then\n"
    "mkdir -p -- \"$S/new\" || exit 1\n"
    EACH_ROOT_ENTRY
    "  mv -- \"$f\" \"$S/new/\" || exit 1\n"
    "done\n"
    "rm -f -- \"$S/moved\" || exit 1\n"
    "fi\n"
    "if [ -d \"$S/old\" ]; then\n"
    "for f in \"$S\"/old/* \"$S\"/old/.[!.]* \"$S\"/old/..?*; do\n"
    "  { [ -e \"$f\" ] || [ -L \"$f\" ]; } || continue\n"
    "  b=${f##*/}\n"
    "  if [ -e \"$b\" ] || [ -L \"$b\" ]; then echo \"$b is in the way of the "
    "workspace's own $b (kept in $S/old)\" >&2; exit 1; fi\n"
    "  mv -- \"$f\" . || exit 1\n"
    "done\n"
    "rmdir -- \"$S/old\" || exit 1\n"
    "fi\n"
    "rm -rf -- \"$S\"\n";

/* Every stage with its state: "staged|moved|done NAME" per line; then,
 * given $1, the new stage $1 with its new/ and old/ (one exec for both). */
static const char list_script[] =
    "for d in " SBX_SNAPSHOT_STAGE_PREFIX "*; do\n"
    "  [ -d \"$d\" ] && [ ! -L \"$d\" ] || continue\n"
    "  s=staged; [ -e \"$d/moved\" ] && s=moved; [ -e \"$d/done\" ] && s=done\n"
    "  printf '%s %s\\n' \"$s\" \"$d\"\n"
    "done\n"
    "[ $# -eq 0 ] || { mkdir -- \"$1\" && mkdir -- \"$1/new\" \"$1/old\"; }\n";

bool sbxh_snapshot_crash_requested(const char *step)
{
#ifdef SBX_TEST_HOOKS
    const char *at = getenv("SBX_TEST_CRASH_AT");
    return at && !strcmp(at, step);
#else
    (void)step;
    return false;
#endif
}

/* Where this process's pids mean something, as 16 hex digits (FNV-1a);
 * all zeros when /proc does not tell (then no stage is judged ended). */
static void realm_tag(char out[17])
{
    char realm[256];
    sbxh_process_realm(realm, sizeof realm);
    if (!strcmp(realm, "unknown")) {
        snprintf(out, 17, "%016d", 0);
        return;
    }
    unsigned long long h = 1469598103934665603ull;
    for (const char *p = realm; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(out, 17, "%016llx", h);
}

void sbxh_snapshot_stage_name(char *out, size_t cap)
{
    char realm[17], rnd[17];
    pid_t pid = getpid();
    realm_tag(realm);
    snprintf(out, cap, SBX_SNAPSHOT_STAGE_PREFIX "%s.%ld.%llu.%s", realm, (long)pid,
             sbxh_process_start_time(pid), sbxs_random_hex(rnd, 4));
}

int sbxh_snapshot_stage_rollback(sbx_handle *h, const char *stage, sbx_cancel *cancel,
                                 sbx_error *err)
{
    return sbxh_snapshot_script(h, "rolling the restore back", rollback_script, stage, NULL,
                                NULL, NULL, cancel, err);
}

int sbxh_snapshot_stage_swap(sbx_handle *h, const char *stage, sbx_cancel *cancel,
                             sbx_error *err)
{
    bool die = sbxh_snapshot_crash_requested("restore-mid-swap");
    int rc = sbxh_snapshot_script(h, "swapping the restored tree in", swap_script, stage,
                                  die ? "kill-mid-swap" : NULL, NULL, NULL, cancel, err);
    if (die)
        raise(SIGKILL);
    if (rc == SBX_OK)
        return SBX_OK;
    sbx_error rerr, first = *err;
    if (sbxh_snapshot_stage_rollback(h, stage, NULL, &rerr) != SBX_OK)
        return sbx_error_set(err, rc,
                             "%s; rolling back failed too (%s): the workspace's entries "
                             "are kept in %s/old, and the next restore or snapshot puts "
                             "them back",
                             first.message, rerr.message, stage);
    return rc;
}

/* ---- recovery ---------------------------------------------------------- */

struct listing {
    char buf[16384];
    size_t len;
};

static int listing_write(void *ctx, const void *buf, size_t n)
{
    struct listing *l = ctx;
    size_t room = sizeof l->buf - 1 - l->len;
    memcpy(l->buf + l->len, buf, n < room ? n : room); /* the rest is dropped */
    l->len += n < room ? n : room;
    l->buf[l->len] = '\0';
    return 0;
}

/* Parse a stage name: our realm's and certainly ended (true), or another
 * realm's, unknown, or alive (false). A name not of our making is never
 * ours to touch. */
static bool stage_abandoned(const char *name, const char *realm)
{
    size_t plen = strlen(SBX_SNAPSHOT_STAGE_PREFIX);
    if (strncmp(name, SBX_SNAPSHOT_STAGE_PREFIX, plen) != 0)
        return false;
    const char *p = name + plen;
    if (!strcmp(realm, "0000000000000000") || strlen(p) < 17 ||
        strncmp(p, realm, 16) != 0 || p[16] != '.')
        return false;
    p += 17;
    char *end;
    long pid = strtol(p, &end, 10);
    if (end == p || *end != '.' || pid <= 0)
        return false;
    p = end + 1;
    unsigned long long start = strtoull(p, &end, 10);
    if (end == p || *end != '.' || strspn(end + 1, "0123456789abcdef") != 8 ||
        end[9] != '\0')
        return false;
    return sbxh_process_gone((pid_t)pid, start);
}

int sbxh_snapshot_recover(sbx_handle *h, const char *make, sbx_cancel *cancel,
                          sbx_error *err)
{
    struct listing *l = calloc(1, sizeof *l);
    if (!l)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    struct sbx_sink sink = SBX_SINK_INIT(l, listing_write);
    int rc = sbxh_snapshot_script(h, "looking for interrupted restores", list_script, make,
                                  NULL, &sink, NULL, cancel, err);
    char realm[17];
    realm_tag(realm);
    for (char *line = l->buf; rc == SBX_OK && *line;) {
        char *nl = strchr(line, '\n');
        if (!nl)
            break; /* cut off: the rest is judged next time */
        *nl = '\0';
        char *name = strchr(line, ' ');
        if (name) {
            *name++ = '\0';
            if (make && !strcmp(name, make))
                name = NULL; /* ours, just made (listed before it existed) */
        }
        if (name) {
            if (stage_abandoned(name, realm))
                rc = sbxh_snapshot_stage_rollback(h, name, cancel, err);
            else if (!strcmp(line, "moved"))
                rc = sbx_error_set(err, SBX_E_EXISTS,
                                   "another restore is swapping its tree into this "
                                   "workspace (%.120s): try again when it ended; if its "
                                   "process is gone on another machine, remove that "
                                   "directory's new/ entries from the root and move its "
                                   "old/ entries back",
                                   name);
        }
        line = nl + 1;
    }
    free(l);
    return rc;
}
