/*
 * cmd_memory.c - `sbx memory ACTION ...`: memory stores in the session
 * store (sbx/memory.h, docs/MEMORY.md): create, delete, list, ls, cat,
 * log, put, rm.
 */
#include "cli.h"

#include <sbx/memory.h>

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx memory ACTION [OPTIONS] ARGS...\n"
          "\n"
          "Memory stores: versioned trees of small files that sessions mount at\n"
          "/mnt/memory/SLUG (docs/MEMORY.md). A SLUG is 1 to 63 of a-z, 0-9, '-'.\n"
          "\n"
          "Actions:\n"
          "  create SLUG [--max-file-size SIZE] [--max-files N] [--max-total-size SIZE]\n"
          "                       make an empty store (defaults: 1m, 100000, 1g;\n"
          "                       SIZE in bytes or with k, m, g)\n"
          "  delete SLUG          delete a store with its whole history\n"
          "  list [--json]        the stores: slug, version, files, bytes\n"
          "  ls SLUG [--at V] [--json]\n"
          "                       the files at version V (default: the latest)\n"
          "  cat SLUG PATH [--at V]\n"
          "                       a file's content to standard output\n"
          "  log SLUG [PATH] [--json]\n"
          "                       every version, newest first\n"
          "  put SLUG PATH [--base V | --force]\n"
          "                       a new version from standard input\n"
          "  rm SLUG PATH [--base V | --force]\n"
          "                       delete a file (as a new version)\n"
          "  resolve SLUG SESSION --keep | --discard\n"
          "                       end a conflict of SESSION's read-write\n"
          "                       attachment: --keep commits the session's\n"
          "                       version over the store's, --discard reloads\n"
          "                       the store's heads into the mount\n"
          "\n"
          "put and rm are refused when the file's head is not the version they\n"
          "are based on: by default the head read when the command started (so a\n"
          "session committing meanwhile is not overwritten), --base V to name it\n"
          "(0: the file must not exist), --force for no check.\n"
          "\n"
          "Options:\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 1 when a change was refused as a conflict,\n"
          "2 for bad usage, 125 when sbx failed.\n", f);
}

/* What the options of every action set. */
struct memory_opts {
    int64_t at, base;
    bool have_base, force;
    int resolve; /* 1 keep, 2 discard */
    struct sbx_memory_limits limits;
    int json;
};

enum { OPT_AT = 256, OPT_BASE, OPT_FORCE, OPT_MAX_FILE, OPT_MAX_FILES, OPT_MAX_TOTAL,
       OPT_KEEP, OPT_DISCARD };

static bool parse_count(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 0)
        return false;
    *out = v;
    return true;
}

/* Bytes, optionally with k, m or g (powers of 1024). */
static bool parse_size(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || v < 0)
        return false;
    int shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    else if (*end == 'g' || *end == 'G')
        shift = 30;
    if (shift)
        end++;
    if (*end || v > (INT64_MAX >> shift))
        return false;
    *out = (int64_t)v << shift;
    return true;
}

static int own_option(void *ud, int c, const char *arg)
{
    struct memory_opts *o = ud;
    bool ok = true;
    switch (c) {
    case OPT_AT:
        ok = parse_count(arg, &o->at) && o->at > 0;
        break;
    case OPT_BASE:
        ok = parse_count(arg, &o->base);
        o->have_base = true;
        break;
    case OPT_KEEP:
        o->resolve = 1;
        break;
    case OPT_DISCARD:
        o->resolve = 2;
        break;
    case OPT_FORCE:
        o->force = true;
        break;
    case OPT_MAX_FILE:
        ok = parse_size(arg, &o->limits.max_file_bytes) && o->limits.max_file_bytes > 0;
        break;
    case OPT_MAX_FILES:
        ok = parse_count(arg, &o->limits.max_files) && o->limits.max_files > 0;
        break;
    case OPT_MAX_TOTAL:
        ok = parse_size(arg, &o->limits.max_total_bytes) &&
             o->limits.max_total_bytes > 0;
        break;
    default:
        return CLI_OPTION_UNKNOWN;
    }
    if (!ok)
        return cli_usage_error("memory", CLI_EXIT_USAGE, "bad value '%s'", arg);
    return CLI_EXIT_OK;
}

/* ---- output ------------------------------------------------------------- */

static void print_json(json_object *o, size_t *count)
{
    printf("%s\n  %s", *count ? "," : "",
           json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                 JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    (*count)++;
}

/* A path or slug as a table cell: controls shown as '?'. */
static void print_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
}

static void when_text(int64_t ms, char *out, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    snprintf(out, cap, "-");
    if (gmtime_r(&t, &tm))
        strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

struct printer {
    bool json;
    size_t count;
};

static int print_store(void *ud, const struct sbx_memory_info *m)
{
    struct printer *p = ud;
    if (p->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "slug", json_object_new_string(m->slug));
        json_object_object_add(o, "version", json_object_new_int64(m->version));
        json_object_object_add(o, "files", json_object_new_int64(m->files));
        json_object_object_add(o, "bytes", json_object_new_int64(m->bytes));
        json_object_object_add(o, "created_at", json_object_new_int64(m->created_at));
        json_object_object_add(o, "max_file_bytes",
                               json_object_new_int64(m->max_file_bytes));
        json_object_object_add(o, "max_files", json_object_new_int64(m->max_files));
        json_object_object_add(o, "max_total_bytes",
                               json_object_new_int64(m->max_total_bytes));
        print_json(o, &p->count);
        return 0;
    }
    if (p->count++ == 0)
        printf("%-24s %8s %8s %12s\n", "SLUG", "VERSION", "FILES", "BYTES");
    printf("%-24s %8lld %8lld %12lld\n", m->slug, (long long)m->version,
           (long long)m->files, (long long)m->bytes);
    return 0;
}

static int print_file(void *ud, const struct sbx_memory_file *f)
{
    struct printer *p = ud;
    if (p->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "path", json_object_new_string(f->path));
        json_object_object_add(o, "version", json_object_new_int64(f->version));
        if (f->author) {
            json_object_object_add(o, "deleted", json_object_new_boolean(f->deleted));
            json_object_object_add(o, "author", json_object_new_string(f->author));
            json_object_object_add(o, "created_at",
                                   json_object_new_int64(f->created_at));
        }
        json_object_object_add(o, "sha256",
                               f->sha256 ? json_object_new_string(f->sha256) : NULL);
        json_object_object_add(o, "size", json_object_new_int64(f->file_size));
        print_json(o, &p->count);
        return 0;
    }
    if (f->author) {
        char when[32];
        when_text(f->created_at, when, sizeof when);
        printf("%6lld %-20s %-8s %-12.12s %10lld ", (long long)f->version, when,
               f->deleted ? "deleted" : "written", f->sha256 ? f->sha256 : "-",
               (long long)f->file_size);
        print_text(f->author);
        putchar(' ');
    } else {
        printf("%6lld %-12.12s %10lld ", (long long)f->version, f->sha256,
               (long long)f->file_size);
    }
    print_text(f->path);
    putchar('\n');
    p->count++;
    return 0;
}

static int stdout_write(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    return fwrite(buf, 1, len, stdout) == len ? 0 : -1;
}

static long stdin_read(void *ctx, void *buf, size_t cap)
{
    (void)ctx;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, cap);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

/* The version of path's head as `put`/`rm` base it by default: 0 when the
 * path has never been written or was deleted last. */
struct head_probe {
    int64_t version;
    bool found;
};

static int first_version(void *ud, const struct sbx_memory_file *f)
{
    struct head_probe *h = ud;
    h->version = f->version;
    h->found = true;
    return 1; /* the newest is enough */
}

/* ---- actions ------------------------------------------------------------ */

static int failed(int rc, const sbx_error *err)
{
    cli_error("%s", err->message[0] ? err->message : sbx_strerror((sbx_status)rc));
    return rc == SBX_E_EXISTS && strstr(err->message, "conflict") ? CLI_EXIT_FAIL
                                                                   : CLI_EXIT_SBX;
}

static int act(sbx_sessions *m, const char *action, struct memory_opts *o, int n,
               char **args)
{
    sbx_error err;
    memset(&err, 0, sizeof err);
    struct printer pr = {o->json != 0, 0};
    int rc = SBX_OK;
    int64_t version = 0;
    if (!strcmp(action, "create")) {
        o->limits.size = sizeof o->limits;
        rc = sbx_memory_create(m, args[0], &o->limits, &err);
    } else if (!strcmp(action, "delete")) {
        rc = sbx_memory_delete(m, args[0], &err);
    } else if (!strcmp(action, "resolve")) {
        if (!o->resolve)
            return cli_usage_error("memory", CLI_EXIT_USAGE,
                                   "resolve needs --keep or --discard");
        rc = sbx_memory_resolve(m, args[1], args[0], o->resolve == 1, &err);
    } else if (!strcmp(action, "list") || !strcmp(action, "ls") ||
               !strcmp(action, "log")) {
        if (pr.json)
            fputs("[", stdout);
        if (!strcmp(action, "list"))
            rc = sbx_memory_list(m, print_store, &pr, &err);
        else if (!strcmp(action, "ls"))
            rc = sbx_memory_ls(m, args[0], o->at, print_file, &pr, &err);
        else
            rc = sbx_memory_log(m, args[0], n > 1 ? args[1] : NULL, print_file, &pr,
                                &err);
        if (pr.json)
            fputs(pr.count ? "\n]\n" : "]\n", stdout);
    } else if (!strcmp(action, "cat")) {
        struct sbx_sink sink = SBX_SINK_INIT(NULL, stdout_write);
        rc = sbx_memory_cat(m, args[0], args[1], o->at, &sink, &err);
    } else { /* put, rm */
        int64_t base = o->force ? SBX_MEMORY_ANY_VERSION : o->base;
        if (!o->force && !o->have_base) {
            struct head_probe h = {0, false};
            rc = sbx_memory_log(m, args[0], args[1], first_version, &h, &err);
            if (rc == SBX_E_CANCELLED && h.found)
                rc = SBX_OK;
            base = h.version;
        }
        struct sbx_source src = SBX_SOURCE_INIT(NULL, stdin_read);
        if (rc == SBX_OK && !strcmp(action, "put"))
            rc = sbx_memory_put(m, args[0], args[1], &src, base, &version, &err);
        else if (rc == SBX_OK)
            rc = sbx_memory_rm(m, args[0], args[1], base, &version, &err);
        if (rc == SBX_OK)
            printf("version %lld\n", (long long)version);
    }
    if (fflush(stdout) != 0 && rc == SBX_OK) {
        cli_error("cannot write to standard output");
        return CLI_EXIT_SBX;
    }
    return rc == SBX_OK ? CLI_EXIT_OK : failed(rc, &err);
}

/* Operands each action takes: at least min, at most max. */
static const struct {
    const char *name;
    int min, max;
} actions[] = {
    {"create", 1, 1}, {"delete", 1, 1}, {"list", 0, 0}, {"ls", 1, 1},
    {"cat", 2, 2},    {"log", 1, 2},    {"put", 2, 2},  {"rm", 2, 2},
    {"resolve", 2, 2},
};

int cmd_memory(const struct cli_globals *g, int argc, char **argv)
{
    struct memory_opts o;
    memset(&o, 0, sizeof o);
    const struct option longopts[] = {
        {"json", no_argument, &o.json, 1},
        {"at", required_argument, NULL, OPT_AT},
        {"base", required_argument, NULL, OPT_BASE},
        {"force", no_argument, NULL, OPT_FORCE},
        {"keep", no_argument, NULL, OPT_KEEP},
        {"discard", no_argument, NULL, OPT_DISCARD},
        {"max-file-size", required_argument, NULL, OPT_MAX_FILE},
        {"max-files", required_argument, NULL, OPT_MAX_FILES},
        {"max-total-size", required_argument, NULL, OPT_MAX_TOTAL},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"memory", CLI_EXIT_USAGE, usage, ":c:h", longopts,
                                    own_option, &o, &globals};
    int status = cli_parse_options(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    /* getopt permutes: the operands (action first) are at the end. */
    int n = argc - optind;
    char **ops = argv + optind;
    if (n < 1)
        return cli_usage_error("memory", CLI_EXIT_USAGE, "missing ACTION");
    size_t a = 0;
    while (a < sizeof actions / sizeof *actions && strcmp(actions[a].name, ops[0]))
        a++;
    if (a == sizeof actions / sizeof *actions)
        return cli_usage_error("memory", CLI_EXIT_USAGE, "unknown action '%s'", ops[0]);
    if (n - 1 < actions[a].min || n - 1 > actions[a].max)
        return cli_usage_error("memory", CLI_EXIT_USAGE, "%s takes %d to %d arguments",
                               ops[0], actions[a].min, actions[a].max);
    if (o.force && o.have_base)
        return cli_usage_error("memory", CLI_EXIT_USAGE,
                               "--base and --force exclude each other");
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(&globals, NULL, &ctx, &m) != SBX_OK)
        return CLI_EXIT_SBX;
    status = act(m, ops[0], &o, n - 1, ops + 1);
    cli_sessions_close(ctx, m);
    return status;
}
