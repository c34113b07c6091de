/*
 * cmd_sessions.c - `sbx sessions [--json]`: list the sessions that have a
 * sandbox, page by page from the store (memory stays bounded however many
 * there are).
 */
#include "cli.h"
#include "utf8.h"

#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 500

struct list_state {
    bool json;
    size_t count;
    char *last; /* key of the last row printed, the next page's cursor */
    bool failed;
};

static void usage(FILE *f)
{
    fputs("Usage: sbx sessions [OPTIONS]\n"
          "\n"
          "List the sessions that have a sandbox: key, provider, state\n"
          "(active; paused when paused and not used since; deleting once\n"
          "fenced), creation time (UTC) and the provider's reference, in key\n"
          "order.\n"
          "\n"
          "Options:\n"
          "      --json         print a JSON array of objects with the members\n"
          "                     session, provider, external_id, spec_hash,\n"
          "                     created_at (ms since the epoch), deleting,\n"
          "                     paused, last_used_at (ms since the epoch)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed.\n", f);
}

/* A key as a table cell: bytes that could move the cursor or change the
 * terminal (controls, DEL) are shown as '?'. --json escapes them instead. */
static void print_key(const char *key)
{
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one
 * (the strict rules of shared/utf8.c). */
static size_t utf8_sequence(const unsigned char *p)
{
    size_t n = p[0] < 0x80 ? 1 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
    for (size_t i = 1; i < n; i++)
        if (!p[i])
            return 0;
    return sbxs_utf8_valid(p, n) ? n : 0;
}

/* A session key as JSON: the key itself when it is valid UTF-8 (json-c
 * escapes control characters); otherwise a string with U+FFFD for each
 * invalid byte, so the output stays valid JSON, plus the exact bytes in
 * hex under "session_hex". */
static void add_key(json_object *o, const char *key)
{
    const unsigned char *k = (const unsigned char *)key;
    size_t len = strlen(key), i = 0, n;
    while (i < len && (n = utf8_sequence(k + i)) != 0)
        i += n;
    if (i == len) {
        json_object_object_add(o, "session", json_object_new_string(key));
        return;
    }
    char *lossy = malloc(3 * len + 1), *hex = malloc(2 * len + 1);
    if (lossy && hex) {
        size_t w = 0;
        for (i = 0; i < len; i += n) {
            n = utf8_sequence(k + i);
            if (n == 0) {
                memcpy(lossy + w, "\xef\xbf\xbd", 3); /* U+FFFD */
                w += 3;
                n = 1;
            } else {
                memcpy(lossy + w, k + i, n);
                w += n;
            }
        }
        lossy[w] = '\0';
        for (i = 0; i < len; i++)
            snprintf(hex + 2 * i, 3, "%02x", k[i]);
        json_object_object_add(o, "session", json_object_new_string(lossy));
        json_object_object_add(o, "session_hex", json_object_new_string(hex));
    }
    free(lossy);
    free(hex);
}

static int print_one(void *ud, const struct sbx_session_info *s)
{
    struct list_state *st = ud;
    if (st->json) {
        json_object *o = json_object_new_object();
        add_key(o, s->session_key);
        json_object_object_add(o, "provider", json_object_new_string(s->provider));
        json_object_object_add(o, "external_id",
                               json_object_new_string(s->external_id));
        json_object_object_add(o, "spec_hash",
                               s->spec_hash ? json_object_new_string(s->spec_hash)
                                            : NULL);
        json_object_object_add(o, "created_at", json_object_new_int64(s->created_at));
        json_object_object_add(o, "deleting", json_object_new_boolean(s->deleting));
        json_object_object_add(o, "paused", json_object_new_boolean(s->paused));
        json_object_object_add(o, "last_used_at", json_object_new_int64(s->last_used_at));
        printf("%s\n  %s", st->count ? "," : "",
               json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        char when[32] = "-";
        time_t t = (time_t)(s->created_at / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (st->count == 0)
            printf("%-32s %-12s %-8s %-20s %s\n", "SESSION", "PROVIDER", "STATE",
                   "CREATED", "REFERENCE");
        print_key(s->session_key);
        size_t len = strlen(s->session_key);
        printf("%*s %-12s %-8s %-20s %s\n", len < 32 ? (int)(32 - len) : 0, "",
               s->provider, s->deleting ? "deleting" : s->paused ? "paused" : "active", when,
               s->external_id);
    }
    st->count++;
    free(st->last);
    st->last = strdup(s->session_key);
    if (!st->last) {
        st->failed = true;
        return 1;
    }
    return 0;
}

static int list_all(sbx_sessions *m, bool json)
{
    struct list_state st = {json, 0, NULL, false};
    if (json)
        fputs("[", stdout);
    int status = CLI_EXIT_OK;
    for (;;) {
        bool more = false;
        sbx_error err;
        int rc = sbx_session_list(m, st.last, PAGE, print_one, &st, &more, &err);
        if (st.failed) {
            cli_error("out of memory");
            status = CLI_EXIT_SBX;
            break;
        }
        if (rc != SBX_OK) {
            status = cli_session_failed(rc, &err);
            break;
        }
        if (!more)
            break;
    }
    if (json)
        fputs(st.count ? "\n]\n" : "]\n", stdout);
    free(st.last);
    if (fflush(stdout) != 0 && status == CLI_EXIT_OK) {
        cli_error("cannot write the list to standard output");
        status = CLI_EXIT_SBX;
    }
    return status;
}

int cmd_sessions(const struct cli_globals *g, int argc, char **argv)
{
    int json = 0;
    const struct option longopts[] = {
        {"json", no_argument, &json, 1},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"sessions", CLI_EXIT_SBX, usage, "+:c:h", longopts,
                                    NULL, NULL, &globals};
    int status = cli_parse_no_operands(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(&globals, NULL, &ctx, &m) != SBX_OK)
        return CLI_EXIT_SBX;
    status = list_all(m, json != 0);
    cli_sessions_close(ctx, m);
    return status;
}
