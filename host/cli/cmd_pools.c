/*
 * cmd_pools.c - `sbx pools [--json]`: the configured warm pools (size,
 * members per state) and every pool member in the store, with its state
 * (creating, ready, checking, claimed) and reference. Members of a pool no
 * longer configured (or configured with another spec) are listed too,
 * marked as such: reconcile destroys them.
 */
#include "cli.h"

#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx pools [OPTIONS]\n"
          "\n"
          "List the warm pools of the configuration (name, provider, size, and\n"
          "how many members are ready, being created or checked, or claimed)\n"
          "and every pool member with its state, creation time (UTC), the\n"
          "provider's reference and, once claimed, the claiming session.\n"
          "'sbx reconcile' keeps each pool at its size.\n"
          "\n"
          "Options:\n"
          "      --json         print one JSON object: \"pools\" (name, provider,\n"
          "                     spec_hash, size, ready, creating, checking,\n"
          "                     claimed) and \"members\" (pool, provider,\n"
          "                     member_key, external_id, state, claimed_by,\n"
          "                     created_at in ms since the epoch, configured)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed.\n", f);
}

struct counts {
    char name[80];
    size_t ready, creating, checking, claimed;
};

struct collect {
    json_object *pools, *members;
    struct counts *c;
    size_t nc;
    bool oom;
};

static json_object *str_or_null(const char *s)
{
    return s ? json_object_new_string(s) : NULL;
}

static int on_pool(void *ud, const struct sbx_pool_info *p)
{
    struct collect *st = ud;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(p->name));
    json_object_object_add(o, "provider", json_object_new_string(p->provider));
    json_object_object_add(o, "spec_hash", json_object_new_string(p->spec_hash));
    json_object_object_add(o, "size", json_object_new_int64((int64_t)p->size));
    json_object_array_add(st->pools, o);
    struct counts *nc = realloc(st->c, (st->nc + 1) * sizeof *nc);
    if (!nc) {
        st->oom = true;
        return 1;
    }
    st->c = nc;
    memset(&nc[st->nc], 0, sizeof nc[st->nc]);
    snprintf(nc[st->nc].name, sizeof nc[st->nc].name, "%s", p->name);
    st->nc++;
    return 0;
}

static int on_member(void *ud, const struct sbx_pool_member_info *m)
{
    struct collect *st = ud;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "pool", json_object_new_string(m->pool));
    json_object_object_add(o, "provider", json_object_new_string(m->provider));
    json_object_object_add(o, "member_key", json_object_new_string(m->member_key));
    json_object_object_add(o, "external_id", str_or_null(m->external_id));
    json_object_object_add(o, "state", json_object_new_string(m->state));
    json_object_object_add(o, "claimed_by", str_or_null(m->claimed_by));
    json_object_object_add(o, "created_at", json_object_new_int64(m->created_at));
    json_object_object_add(o, "configured", json_object_new_boolean(m->configured));
    json_object_array_add(st->members, o);
    for (size_t i = 0; m->configured && i < st->nc; i++) {
        if (strcmp(st->c[i].name, m->pool))
            continue;
        if (!strcmp(m->state, "ready"))
            st->c[i].ready++;
        else if (!strcmp(m->state, "creating"))
            st->c[i].creating++;
        else if (!strcmp(m->state, "checking"))
            st->c[i].checking++;
        else
            st->c[i].claimed++;
    }
    return 0;
}

static const char *jstr(json_object *o, const char *k)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) && v ? json_object_get_string(v) : "-";
}

/* A cell of the table: controls shown as '?'. */
static void cell(const char *s, int width)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++)
        putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
    if (width)
        printf("%*s", n < width ? width - n : 1, "");
}

static void print_table(const struct collect *st)
{
    printf("%-16s %-12s %5s %6s %9s %8s %8s\n", "POOL", "PROVIDER", "SIZE", "READY",
           "CREATING", "CHECKING", "CLAIMED");
    for (size_t i = 0; i < st->nc; i++) {
        json_object *o = json_object_array_get_idx(st->pools, i);
        json_object *sz;
        json_object_object_get_ex(o, "size", &sz);
        cell(st->c[i].name, 17);
        cell(jstr(o, "provider"), 13);
        printf("%5lld %6zu %9zu %8zu %8zu\n", (long long)json_object_get_int64(sz),
               st->c[i].ready, st->c[i].creating, st->c[i].checking, st->c[i].claimed);
    }
    size_t n = json_object_array_length(st->members);
    if (!n)
        return;
    printf("\n%-16s %-9s %-20s %-14s %s\n", "POOL", "STATE", "CREATED", "REFERENCE",
           "MEMBER / CLAIMED BY");
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(st->members, i), *v, *cfg;
        json_object_object_get_ex(o, "created_at", &v);
        json_object_object_get_ex(o, "configured", &cfg);
        char when[32] = "-";
        time_t t = (time_t)(json_object_get_int64(v) / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        cell(jstr(o, "pool"), 17);
        cell(jstr(o, "state"), 10);
        cell(when, 21);
        char ref[13];
        snprintf(ref, sizeof ref, "%s", jstr(o, "external_id"));
        cell(ref, 15);
        cell(jstr(o, "member_key"), 0);
        json_object *cb;
        if (json_object_object_get_ex(o, "claimed_by", &cb) && cb) {
            fputs(" -> ", stdout);
            cell(json_object_get_string(cb), 0);
        }
        if (!json_object_get_boolean(cfg))
            fputs(" (not configured: reconcile destroys it)", stdout);
        putchar('\n');
    }
}

int cmd_pools(const struct cli_globals *g, int argc, char **argv)
{
    int json = 0;
    const struct option longopts[] = {
        {"json", no_argument, &json, 1},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"pools", CLI_EXIT_SBX, usage, "+:c:h", longopts,
                                    NULL, NULL, &globals};
    int status = cli_parse_no_operands(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(&globals, NULL, &ctx, &m) != SBX_OK)
        return CLI_EXIT_SBX;
    struct collect st = {json_object_new_array(), json_object_new_array(), NULL, 0, false};
    sbx_error err;
    int rc = sbx_pools_list(m, on_pool, on_member, &st, &err);
    if (st.oom) {
        cli_error("out of memory");
        status = CLI_EXIT_SBX;
    } else if (rc != SBX_OK) {
        status = cli_session_failed(rc, &err);
    } else if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "pools", json_object_get(st.pools));
        json_object_object_add(o, "members", json_object_get(st.members));
        for (size_t i = 0; i < st.nc; i++) {
            json_object *p = json_object_array_get_idx(st.pools, i);
            json_object_object_add(p, "ready", json_object_new_int64((int64_t)st.c[i].ready));
            json_object_object_add(p, "creating",
                                   json_object_new_int64((int64_t)st.c[i].creating));
            json_object_object_add(p, "checking",
                                   json_object_new_int64((int64_t)st.c[i].checking));
            json_object_object_add(p, "claimed",
                                   json_object_new_int64((int64_t)st.c[i].claimed));
        }
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        print_table(&st);
    }
    json_object_put(st.pools);
    json_object_put(st.members);
    free(st.c);
    cli_sessions_close(ctx, m);
    if (fflush(stdout) != 0 && status == CLI_EXIT_OK) {
        cli_error("cannot write the list to standard output");
        status = CLI_EXIT_SBX;
    }
    return status;
}
