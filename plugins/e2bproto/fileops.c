/*
 * fileops.c - file_list, file_stat, file_mkdir, file_remove, file_rename
 * (SBX_CAP_FILE_OPS).
 *
 * Paths are confined as for read_file (paths.c), but the last component is
 * never followed: e2b_resolve_entry resolves the parent and looks at the
 * entry itself with filesystem.Stat, which reports a symlink as a symlink.
 *
 * stat is filesystem.Stat. The others are short commands in the sandbox, as
 * the configured user, so that the user's permissions apply (envd's own
 * filesystem calls run as root) and each failure has its own exit code:
 * envd's MakeDir has no mode and always makes parents, its Remove is always
 * recursive, its Move always replaces, and its ListDir answers with the
 * whole directory in one message (no paging), which for a directory of a
 * million entries is hundreds of MB. The listing is `find -maxdepth 1`
 * instead, NUL-separated on stdout, parsed entry by entry as the stream
 * arrives: memory stays bounded by one entry whatever the directory holds.
 * See e2b_core.h and docs/providers/e2b.md, "File operations".
 */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The listing: one record per entry, "type size mode mtime name\0". */
static const char LIST[] =
    "[ -d \"$1\" ] || exit 2\n"
    "LC_ALL=C find \"$1\" -mindepth 1 -maxdepth 1 -printf '%y %s %m %T@ %f\\0'\n";

/* mkdir, rm, mv with distinct exit codes: 2 missing, 13 denied, 17 exists,
 * 20 a component or the source is not a directory, 21 a directory is in
 * the way, 22 a directory into itself, 39 not empty. */
static const char FILEOP[] =
    "umask 022\n"
    "op=$1; p=$2\n"
    "denied() { case $1 in *denied*|*'not permitted'*) exit 13;; esac; echo \"$1\" >&2; }\n"
    "case $op in\n"
    "mkdir) m=$3; par=$4\n"
    "  if [ -L \"$p\" ] || [ -e \"$p\" ]; then\n"
    "    if [ \"$par\" = 1 ] && [ -d \"$p\" ] && [ ! -L \"$p\" ]; then exit 0; fi; exit 17; fi\n"
    "  q=${p%/*}\n"
    "  if [ \"$par\" = 1 ]; then e=$(LC_ALL=C mkdir -p -- \"$q\" 2>&1) || { denied \"$e\"; exit 20; }; fi\n"
    "  [ -d \"$q\" ] || exit 2\n"
    "  e=$(LC_ALL=C mkdir -m \"$m\" -- \"$p\" 2>&1) && exit 0\n"
    "  denied \"$e\"; exit 1;;\n"
    "rm) r=$3\n"
    "  [ -L \"$p\" ] || [ -e \"$p\" ] || exit 2\n"
    "  if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then\n"
    "    if [ \"$r\" = 1 ]; then e=$(LC_ALL=C rm -rf -- \"$p\" 2>&1) && exit 0; denied \"$e\"; exit 1; fi\n"
    "    e=$(LC_ALL=C rmdir -- \"$p\" 2>&1) && exit 0\n"
    "    case $e in *'not empty'*) exit 39;; esac; denied \"$e\"; exit 1\n"
    "  fi\n"
    "  e=$(LC_ALL=C rm -f -- \"$p\" 2>&1) && exit 0\n"
    "  denied \"$e\"; exit 1;;\n"
    "mv) q=$3; nr=$4\n"
    "  [ -L \"$p\" ] || [ -e \"$p\" ] || exit 2\n"
    "  [ -d \"${q%/*}\" ] || exit 2\n"
    "  if [ -L \"$q\" ] || [ -e \"$q\" ]; then\n"
    "    [ \"$nr\" = 1 ] && exit 17\n"
    "    if [ -d \"$q\" ] && [ ! -L \"$q\" ]; then\n"
    "      if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then [ -n \"$(ls -A -- \"$q\")\" ] && exit 39; else exit 21; fi\n"
    "    elif [ -d \"$p\" ] && [ ! -L \"$p\" ]; then exit 20; fi\n"
    "  fi\n"
    "  e=$(LC_ALL=C mv -T -- \"$p\" \"$q\" 2>&1) && exit 0\n"
    "  case $e in *subdirectory*) exit 22;; esac; denied \"$e\"; exit 1;;\n"
    "esac\n"
    "exit 64\n";

/* Run FILEOP or LIST as the configured user. */
static int run_op(sbx_sandbox *sb, sbx_call *call, const char *script,
                  const char *const *args, const struct sbx_sink *out, int *code, char *msg,
                  size_t cap)
{
    const char *argv[12];
    size_t n = 0;
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = script;
    argv[n++] = "sbx-file";
    for (size_t i = 0; args[i] && n < 11; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    return e2b_exec_helper_as(sb, call, NULL, "/", argv, out, 120000, code, msg, cap);
}

/* The status FILEOP's exit code stands for (SBX_OK for 0). */
static int op_status(struct e2b_state *st, sbx_call *call, const char *op, const char *path,
                     int code, char *msg)
{
    size_t ml = strlen(msg);
    while (ml && msg[ml - 1] == '\n')
        msg[--ml] = '\0';
    const char *p = st->cfg.provider;
    switch (code) {
    case 0:
        return SBX_OK;
    case 2:
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: %s: %s does not exist", p, op, path);
    case 13:
        return e2b_error(st, call, SBX_E_DENIED, "%s: %s: %s: permission denied", p, op, path);
    case 17:
        return e2b_error(st, call, SBX_E_EXISTS, "%s: %s: %s already exists", p, op, path);
    case 20:
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: %s: not a directory%s%s", p, op, path,
                         *msg ? ": " : "", msg);
    case 21:
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: %s: a directory is in the way", p,
                         op, path);
    case 22:
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: %s: a directory cannot move into "
                         "itself", p, op, path);
    case 39:
        return e2b_error(st, call, SBX_E_EXISTS, "%s: %s: %s is a directory that is not empty",
                         p, op, path);
    default:
        return e2b_error(st, call, SBX_E_IO, "%s: %s %s failed (exit %d): %s", p, op, path, code,
                         msg);
    }
}

/* Whether abs is the root of the workspace or of the outputs directory. */
static int is_root(struct e2b_state *st, const char *abs)
{
    return !strcmp(abs, st->cfg.workspace) || !strcmp(abs, E2B_OUTPUTS);
}

/* Streams find's records to the caller's sink, one entry at a time. */
struct list_sink {
    const struct sbx_file_list_sink *sink;
    char rec[4400];
    size_t len;
    int overflow;
};

static int list_record(struct list_sink *l)
{
    char t;
    unsigned long long size;
    unsigned mode;
    long long sec;
    int off = 0;
    char frac[16] = "";
    if (sscanf(l->rec, "%c %llu %o %lld%n", &t, &size, &mode, &sec, &off) < 4)
        return 0;
    const char *p = l->rec + off;
    if (*p == '.') {
        size_t i = 0;
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (i < 9)
                frac[i++] = *p;
        while (i < 9)
            frac[i++] = '0';
        frac[9] = '\0';
    }
    if (*p != ' ' || !p[1])
        return 0;
    struct sbx_file_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    info.type = t == 'f' ? SBX_FILE_REGULAR : t == 'd' ? SBX_FILE_DIR
              : t == 'l' ? SBX_FILE_SYMLINK : SBX_FILE_OTHER;
    info.name = p + 1;
    info.bytes = size;
    info.mode = mode & 07777;
    info.mtime_ns = sec * 1000000000LL + (frac[0] ? atoll(frac) : 0);
    return l->sink->entry(l->sink->ctx, &info);
}

static int list_write(void *ctx, const void *buf, size_t len)
{
    struct list_sink *l = ctx;
    const char *b = buf;
    for (size_t i = 0; i < len; i++) {
        if (b[i] == '\0') {
            l->rec[l->len] = '\0';
            int rc = l->overflow ? 0 : list_record(l);
            l->len = 0;
            l->overflow = 0;
            if (rc != 0)
                return rc;
        } else if (l->len + 1 < sizeof l->rec) {
            l->rec[l->len++] = b[i];
        } else {
            l->overflow = 1; /* longer than any name: skipped */
        }
    }
    return 0;
}

int e2b_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_file_list_sink *sink)
{
    struct e2b_state *st = sb->st;
    char *abs = NULL;
    int type, ptype;
    e2b_keep_alive(sb, call);
    int rc = e2b_resolve_entry(sb, call, "file_list", path, 1, &abs, &type, &ptype);
    if (rc != SBX_OK)
        return rc;
    if (type == E2B_FT_NONE)
        rc = e2b_error(st, call, SBX_E_NOT_FOUND, "%s: file_list: %s does not exist",
                       st->cfg.provider, path ? path : "");
    else if (type != E2B_FT_DIR)
        rc = e2b_error(st, call, SBX_E_INVALID, "%s: file_list: %s is not a directory",
                       st->cfg.provider, path ? path : "");
    if (rc != SBX_OK) {
        free(abs);
        return rc;
    }
    struct list_sink *l = calloc(1, sizeof *l);
    if (!l) {
        free(abs);
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    l->sink = sink;
    struct sbx_sink out = SBX_SINK_INIT(l, list_write);
    const char *args[] = {abs, NULL};
    char msg[512];
    int code = -1;
    rc = run_op(sb, call, LIST, args, &out, &code, msg, sizeof msg);
    if (rc == SBX_OK && code != 0)
        rc = strstr(msg, "denied")
                 ? e2b_error(st, call, SBX_E_DENIED, "%s: file_list: %s: permission denied",
                             st->cfg.provider, path ? path : "")
                 : op_status(st, call, "file_list", path ? path : "", code, msg);
    free(l);
    free(abs);
    return rc;
}

/* google.protobuf.Timestamp in JSON ("2026-12-03T00:08:00.123456789Z" or
 * with an offset) -> ns since the epoch; 0 when unreadable. */
static int64_t parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int n = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) < 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    int64_t sec = (int64_t)timegm(&tm), ns = 0;
    const char *p = s + n;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (digits < 9) {
                ns = ns * 10 + (*p - '0');
                digits++;
            }
        while (digits++ < 9)
            ns *= 10;
    }
    int sh, sm;
    if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &sh, &sm) == 2)
        sec -= (*p == '+' ? 1 : -1) * (int64_t)(sh * 3600 + sm * 60);
    return sec * 1000000000LL + ns;
}

int e2b_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path, struct sbx_file_info *out)
{
    struct e2b_state *st = sb->st;
    char *abs = NULL;
    int type, ptype;
    e2b_keep_alive(sb, call);
    int rc = e2b_resolve_entry(sb, call, "file_stat", path, 1, &abs, &type, &ptype);
    if (rc != SBX_OK)
        return rc;
    if (type == E2B_FT_NONE) {
        free(abs);
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: file_stat: %s does not exist",
                         st->cfg.provider, path ? path : "");
    }
    json_object *body = json_object_new_object(), *doc = NULL;
    json_object_object_add(body, "path", json_object_new_string(abs));
    sbxp_http_error err;
    rc = e2b_envd_unary(sb, call, "filesystem.Filesystem/Stat", body, &doc, 1, &err);
    json_object_put(body);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        rc = e2b_error(st, call, SBX_E_NOT_FOUND, "%s: file_stat: %s does not exist",
                       st->cfg.provider, path ? path : "");
    else if (rc != SBX_OK)
        rc = e2b_envd_report(sb, call, &err, "file_stat %s", path ? path : "");
    free(abs);
    if (rc != SBX_OK)
        return rc;
    json_object *e = sbxp_json_obj(doc, "entry");
    const char *t = sbxp_json_str(e, "type");
    uint32_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    out->type = !t                                 ? SBX_FILE_OTHER
              : !strcmp(t, "FILE_TYPE_FILE")      ? SBX_FILE_REGULAR
              : !strcmp(t, "FILE_TYPE_DIRECTORY") ? SBX_FILE_DIR
              : !strcmp(t, "FILE_TYPE_SYMLINK")   ? SBX_FILE_SYMLINK
                                                   : SBX_FILE_OTHER;
    /* int64 travels as a string in proto3 JSON. */
    const char *sz = sbxp_json_str(e, "size");
    out->bytes = sz ? strtoull(sz, NULL, 10) : (uint64_t)sbxp_json_int(e, "size", 0);
    /* envd's mode is Go's os.FileMode: permission bits, and setuid, setgid
     * and sticky as bits 23, 22 and 20; plain Unix bits are kept too. */
    uint64_t m = (uint64_t)sbxp_json_int(e, "mode", 0);
    out->mode = (uint32_t)(m & 07777);
    if (m & (UINT64_C(1) << 23))
        out->mode |= 04000;
    if (m & (UINT64_C(1) << 22))
        out->mode |= 02000;
    if (m & (UINT64_C(1) << 20))
        out->mode |= 01000;
    out->mtime_ns = parse_time(sbxp_json_str(e, "modifiedTime"));
    json_object_put(doc);
    return SBX_OK;
}

int e2b_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                   uint32_t flags)
{
    struct e2b_state *st = sb->st;
    if (mode & ~0777u)
        return e2b_error(st, call, SBX_E_INVALID, "%s: file_mkdir: mode %o has bits outside 0777",
                         st->cfg.provider, mode);
    char *abs = NULL;
    int type, ptype;
    e2b_keep_alive(sb, call);
    int rc = e2b_resolve_entry(sb, call, "file_mkdir", path, 1, &abs, &type, &ptype);
    if (rc != SBX_OK)
        return rc;
    int parents = (flags & SBX_MKDIR_PARENTS) != 0;
    if (is_root(st, abs) || type != E2B_FT_NONE) {
        rc = parents && type == E2B_FT_DIR
                 ? SBX_OK
                 : e2b_error(st, call, SBX_E_EXISTS, "%s: file_mkdir: %s already exists",
                             st->cfg.provider, path ? path : "");
        free(abs);
        return rc;
    }
    if (ptype == E2B_FT_NONE && !parents) {
        free(abs);
        return e2b_error(st, call, SBX_E_NOT_FOUND,
                         "%s: file_mkdir: the parent of %s does not exist (SBX_MKDIR_PARENTS "
                         "makes it)",
                         st->cfg.provider, path);
    }
    char mb[8], msg[512];
    snprintf(mb, sizeof mb, "%o", mode ? mode : 0755);
    const char *args[] = {"mkdir", abs, mb, parents ? "1" : "0", NULL};
    int code = -1;
    rc = run_op(sb, call, FILEOP, args, NULL, &code, msg, sizeof msg);
    if (rc == SBX_OK)
        rc = op_status(st, call, "file_mkdir", path, code, msg);
    free(abs);
    return rc;
}

int e2b_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags)
{
    struct e2b_state *st = sb->st;
    char *abs = NULL;
    int type, ptype;
    e2b_keep_alive(sb, call);
    int rc = e2b_resolve_entry(sb, call, "file_remove", path, 1, &abs, &type, &ptype);
    if (rc != SBX_OK)
        return rc;
    if (is_root(st, abs))
        rc = e2b_error(st, call, SBX_E_INVALID, "%s: file_remove: %s is the root",
                       st->cfg.provider, path ? path : "");
    else if (type == E2B_FT_NONE)
        rc = e2b_error(st, call, SBX_E_NOT_FOUND, "%s: file_remove: %s does not exist",
                       st->cfg.provider, path);
    if (rc != SBX_OK) {
        free(abs);
        return rc;
    }
    char msg[512];
    const char *args[] = {"rm", abs, (flags & SBX_REMOVE_RECURSIVE) ? "1" : "0", NULL};
    int code = -1;
    rc = run_op(sb, call, FILEOP, args, NULL, &code, msg, sizeof msg);
    if (rc == SBX_OK)
        rc = op_status(st, call, "file_remove", path, code, msg);
    free(abs);
    return rc;
}

int e2b_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                    uint32_t flags)
{
    struct e2b_state *st = sb->st;
    char *a = NULL, *b = NULL;
    int ta, tb, pa, pb;
    e2b_keep_alive(sb, call);
    int rc = e2b_resolve_entry(sb, call, "file_rename", from, 1, &a, &ta, &pa);
    if (rc != SBX_OK)
        return rc;
    rc = e2b_resolve_entry(sb, call, "file_rename", to, 1, &b, &tb, &pb);
    if (rc == SBX_OK && (is_root(st, a) || is_root(st, b)))
        rc = e2b_error(st, call, SBX_E_INVALID, "%s: file_rename: the root cannot be renamed",
                       st->cfg.provider);
    else if (rc == SBX_OK && ta == E2B_FT_NONE)
        rc = e2b_error(st, call, SBX_E_NOT_FOUND, "%s: file_rename: %s does not exist",
                       st->cfg.provider, from);
    else if (rc == SBX_OK && pb != E2B_FT_DIR)
        rc = e2b_error(st, call, SBX_E_NOT_FOUND,
                       "%s: file_rename: the directory of %s does not exist", st->cfg.provider,
                       to);
    if (rc == SBX_OK) {
        char msg[512];
        const char *args[] = {"mv", a, b, (flags & SBX_RENAME_NOREPLACE) ? "1" : "0", NULL};
        int code = -1;
        rc = run_op(sb, call, FILEOP, args, NULL, &code, msg, sizeof msg);
        if (rc == SBX_OK)
            rc = op_status(st, call, "file_rename", code == 17 || code == 39 ? to : from, code,
                           msg);
    }
    free(a);
    free(b);
    return rc;
}
