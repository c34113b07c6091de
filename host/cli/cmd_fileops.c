/*
 * cmd_fileops.c - file operations in a session's workspace
 * (SBX_CAP_FILE_OPS), confined like `sbx read` and `sbx write`:
 *
 *   sbx ls [-l] [--json] SESSION [PATH]
 *   sbx stat [--json] SESSION PATH
 *   sbx mkdir [-p] [-m MODE] SESSION PATH
 *   sbx rm [-r] SESSION PATH
 *   sbx mv [-n|--no-clobber] SESSION FROM TO
 *
 * A listing is printed as the provider streams it (in its order, not
 * sorted), so a directory of any size is listed in bounded memory.
 */
#include "cmd_proc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fileops_args {
    const char *cmd;
    bool long_format, json, parents, recursive, no_clobber;
    unsigned mode;
};

enum { OPT_JSON = 0x100, OPT_NO_CLOBBER };

static int on_option(void *ud, int c, const char *arg)
{
    struct fileops_args *a = ud;
    switch (c) {
    case 'l':
        a->long_format = true;
        return CLI_EXIT_OK;
    case OPT_JSON:
        a->json = true;
        return CLI_EXIT_OK;
    case 'p':
        a->parents = true;
        return CLI_EXIT_OK;
    case 'r':
    case 'R':
        a->recursive = true;
        return CLI_EXIT_OK;
    case 'n':
    case OPT_NO_CLOBBER:
        a->no_clobber = true;
        return CLI_EXIT_OK;
    case 'm': {
        char *end;
        errno = 0;
        unsigned long v = strtoul(arg, &end, 8);
        if (!*arg || *end || errno || v == 0 || v > 0777)
            return cli_usage_error(a->cmd, CLI_EXIT_SBX,
                                   "invalid --mode '%s' (expected permission bits in "
                                   "octal, 0001 to 0777, such as 0755)",
                                   arg);
        a->mode = (unsigned)v;
        return CLI_EXIT_OK;
    }
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

/* Parse `sbx CMD [OPTIONS] SESSION` and `nmin` to `nmax` operands. */
static int parse(const struct cli_command *cmd, int argc, char **argv, int nmin,
                 int nmax, const char **key, const char **ops)
{
    int rest = 0;
    int status = cli_session_parse(cmd, argc, argv, key, &rest);
    if (status != CLI_EXIT_OK)
        return status;
    int n = 0;
    /* Operands and options may mix after SESSION (`rm S -r dir`). */
    while (rest < argc) {
        if (n == nmax)
            return cli_no_more_arguments(cmd, argc, argv, rest);
        ops[n++] = argv[rest];
        int k = rest;
        status = cli_parse_options(cmd, argc - k, argv + k);
        if (status != CLI_EXIT_OK)
            return status;
        rest = k + optind;
    }
    if (n < nmin)
        return cli_usage_error(cmd->name, cmd->usage_status, "missing %s",
                               nmax == 2 ? (n == 1 ? "TO" : "FROM and TO") : "PATH");
    return CLI_EXIT_OK;
}

static const char *type_name(uint32_t type)
{
    switch (type) {
    case SBX_FILE_REGULAR: return "file";
    case SBX_FILE_DIR: return "directory";
    case SBX_FILE_SYMLINK: return "symlink";
    default: return "other";
    }
}

static char type_char(uint32_t type)
{
    switch (type) {
    case SBX_FILE_REGULAR: return '-';
    case SBX_FILE_DIR: return 'd';
    case SBX_FILE_SYMLINK: return 'l';
    default: return '?';
    }
}

static void mode_text(uint32_t type, uint32_t mode, char out[11])
{
    static const char rwx[] = "rwxrwxrwx";
    out[0] = type_char(type);
    for (int i = 0; i < 9; i++)
        out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
    out[10] = '\0';
}

static void time_text(int64_t mtime_ns, char *buf, size_t len)
{
    time_t t = (time_t)(mtime_ns / 1000000000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(buf, len, "-");
}

/* A name as a table cell: control bytes as '?' (--json keeps them). */
static void print_name(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
}

static json_object *info_json(const struct sbx_file_info *fi, const char *name)
{
    json_object *o = json_object_new_object();
    if (name)
        json_object_object_add(o, "name", cli_json_text(name, strlen(name)));
    json_object_object_add(o, "type", json_object_new_string(type_name(fi->type)));
    json_object_object_add(o, "size", json_object_new_uint64(fi->bytes));
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", (unsigned)(fi->mode & 07777));
    json_object_object_add(o, "mode", json_object_new_string(mode));
    json_object_object_add(o, "mtime_ns", json_object_new_int64(fi->mtime_ns));
    return o;
}

/* ---- ls ------------------------------------------------------------------ */

static void ls_usage(FILE *f)
{
    fputs("Usage: sbx ls [OPTIONS] SESSION [PATH]\n"
          "\n"
          "List the workspace-relative directory PATH (default: the workspace\n"
          "root) of session SESSION's sandbox, in the order the provider reads\n"
          "it. Symlinks are listed as themselves, never followed.\n"
          "\n"
          "Options:\n"
          "  -l                 long format: type and mode, size, modification\n"
          "                     time (UTC), name\n"
          "      --json         one JSON object per line: name, type, size, mode,\n"
          "                     mtime_ns (streamed, not an array)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed.\n", f);
}

static int ls_entry(void *ctx, const struct sbx_file_info *fi)
{
    const struct fileops_args *a = ctx;
    if (a->json) {
        json_object *o = info_json(fi, fi->name);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else if (a->long_format) {
        char mode[11], when[32];
        mode_text(fi->type, fi->mode, mode);
        time_text(fi->mtime_ns, when, sizeof when);
        printf("%s %12llu %s ", mode, (unsigned long long)fi->bytes, when);
        print_name(fi->name);
        putchar('\n');
    } else {
        print_name(fi->name);
        putchar('\n');
    }
    if (ferror(stdout)) {
        sbx_stream_error("cannot write the listing: %s", strerror(errno));
        return SBX_E_IO;
    }
    return SBX_OK;
}

/* What a file command does once the session is open. */
typedef int (*fileop_fn)(sbx_handle *h, const struct fileops_args *a,
                         const char *const *ops, sbx_error *err);

static int run_fileop(const struct cli_globals *g, const char *key,
                      const struct fileops_args *a, const char *const *ops, fileop_fn fn)
{
    struct cli_session s;
    int status = cli_session_open_existing(g, key, &s);
    if (status != CLI_EXIT_OK)
        return status;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = fn(s.h, a, ops, &err);
    if (fflush(stdout) != 0 && rc == SBX_OK)
        rc = sbx_error_set(&err, SBX_E_IO, "cannot write the output: %s",
                           strerror(errno));
    status = rc == SBX_OK ? CLI_EXIT_OK : cli_session_failed(rc, &err);
    cli_session_close(&s);
    return status;
}

static int do_ls(sbx_handle *h, const struct fileops_args *a, const char *const *ops,
                 sbx_error *err)
{
    struct sbx_file_list_sink sink = {sizeof sink, (void *)a, ls_entry};
    return sbx_file_list(h, ops[0], &sink, NULL, err);
}

static int do_stat(sbx_handle *h, const struct fileops_args *a, const char *const *ops,
                   sbx_error *err)
{
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    int rc = sbx_file_stat(h, ops[0], &fi, NULL, err);
    if (rc != SBX_OK)
        return rc;
    if (a->json) {
        cli_json_print(info_json(&fi, NULL));
        return SBX_OK;
    }
    char mode[11], when[32];
    mode_text(fi.type, fi.mode, mode);
    time_text(fi.mtime_ns, when, sizeof when);
    printf("type: %s\nsize: %llu\nmode: %04o (%s)\nmodified: %s UTC\n", type_name(fi.type),
           (unsigned long long)fi.bytes, (unsigned)(fi.mode & 07777), mode, when);
    return SBX_OK;
}

static int do_mkdir(sbx_handle *h, const struct fileops_args *a, const char *const *ops,
                    sbx_error *err)
{
    return sbx_file_mkdir(h, ops[0], a->mode, a->parents ? SBX_MKDIR_PARENTS : 0, NULL,
                          err);
}

static int do_rm(sbx_handle *h, const struct fileops_args *a, const char *const *ops,
                 sbx_error *err)
{
    return sbx_file_remove(h, ops[0], a->recursive ? SBX_REMOVE_RECURSIVE : 0, NULL, err);
}

static int do_mv(sbx_handle *h, const struct fileops_args *a, const char *const *ops,
                 sbx_error *err)
{
    return sbx_file_rename(h, ops[0], ops[1], a->no_clobber ? SBX_RENAME_NOREPLACE : 0,
                           NULL, err);
}

/* ---- usage texts ------------------------------------------------------- */

static void stat_usage(FILE *f)
{
    fputs("Usage: sbx stat [OPTIONS] SESSION PATH\n"
          "\n"
          "Describe the workspace-relative PATH of session SESSION's sandbox:\n"
          "type (file, directory, symlink - never followed - or other), size,\n"
          "mode, modification time.\n"
          "\n"
          "Options:\n"
          "      --json         one JSON object: type, size, mode, mtime_ns\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed (a missing PATH included).\n", f);
}

static void mkdir_usage(FILE *f)
{
    fputs("Usage: sbx mkdir [OPTIONS] SESSION PATH\n"
          "\n"
          "Make the workspace-relative directory PATH in session SESSION's\n"
          "sandbox.\n"
          "\n"
          "Options:\n"
          "  -p, --parents      make missing parents too; an existing directory\n"
          "                     is then no error\n"
          "  -m, --mode MODE    permission bits in octal (default 0755)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed (PATH exists included).\n", f);
}

static void rm_usage(FILE *f)
{
    fputs("Usage: sbx rm [OPTIONS] SESSION PATH\n"
          "\n"
          "Remove the workspace-relative PATH of session SESSION's sandbox: a\n"
          "file, a symlink (itself, never its target) or an empty directory.\n"
          "\n"
          "Options:\n"
          "  -r, --recursive    remove a directory and everything in it (symlinks\n"
          "                     inside are removed, never followed)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed (a missing PATH, a directory\n"
          "with entries without -r, the workspace root).\n", f);
}

static void mv_usage(FILE *f)
{
    fputs("Usage: sbx mv [OPTIONS] SESSION FROM TO\n"
          "\n"
          "Rename the workspace-relative FROM to TO in session SESSION's sandbox\n"
          "(both confined to the workspace), replacing a file at TO.\n"
          "\n"
          "Options:\n"
          "  -n, --no-clobber   refuse when TO exists\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed (TO exists with --no-clobber\n"
          "included).\n", f);
}

/* ---- the commands ---------------------------------------------------------- */

static int file_command(const struct cli_globals *g, int argc, char **argv,
                        const char *name, void (*usage)(FILE *), const char *shortopts,
                        const struct option *longopts, int nmin, int nmax, fileop_fn fn)
{
    struct cli_globals globals = *g;
    struct fileops_args a = {.cmd = name};
    const struct cli_command cmd = {name, CLI_EXIT_SBX, usage, shortopts, longopts,
                                    on_option, &a, &globals};
    const char *key = NULL;
    const char *ops[2] = {NULL, NULL};
    int status = parse(&cmd, argc, argv, nmin, nmax, &key, ops);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    return run_fileop(&globals, key, &a, ops, fn);
}

int cmd_ls(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_LONGOPTS,
    };
    return file_command(g, argc, argv, "ls", ls_usage, "+:lc:h", longopts, 0, 1, do_ls);
}

int cmd_stat(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_LONGOPTS,
    };
    return file_command(g, argc, argv, "stat", stat_usage, "+:c:h", longopts, 1, 1,
                        do_stat);
}

int cmd_mkdir(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"parents", no_argument, NULL, 'p'},
        {"mode", required_argument, NULL, 'm'},
        CLI_COMMON_LONGOPTS,
    };
    return file_command(g, argc, argv, "mkdir", mkdir_usage, "+:pm:c:h", longopts, 1, 1,
                        do_mkdir);
}

int cmd_rm(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"recursive", no_argument, NULL, 'r'},
        CLI_COMMON_LONGOPTS,
    };
    return file_command(g, argc, argv, "rm", rm_usage, "+:rRc:h", longopts, 1, 1, do_rm);
}

int cmd_mv(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"no-clobber", no_argument, NULL, OPT_NO_CLOBBER},
        CLI_COMMON_LONGOPTS,
    };
    return file_command(g, argc, argv, "mv", mv_usage, "+:nc:h", longopts, 2, 2, do_mv);
}
