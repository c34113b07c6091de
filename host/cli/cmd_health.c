/*
 * cmd_health.c - `sbx health [PROVIDER] [--json]`: initialize each enabled
 * provider (or the one named) and run its live check of the backend, with
 * the time each took and a verdict per provider. Exit 0 when every one
 * passed, 1 otherwise. Unlike `sbx check` this reads credentials and
 * contacts the backends; it creates nothing.
 */
#include "cli.h"

#include <json-c/json.h>

#include <getopt.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx health [PROVIDER] [--json]\n"
          "\n"
          "Initialize every enabled provider (or PROVIDER) and run its live\n"
          "check of the backend (docker: _ping and version; a remote service:\n"
          "an authenticated read of its API). Prints one line per provider:\n"
          "  ok    NAME  init MS  check MS  what answered\n"
          "  FAIL  NAME  the error\n"
          "and exits 0 when every provider passed, 1 otherwise. Creates\n"
          "nothing; reads the providers' credentials.\n"
          "\n"
          "Options:\n"
          "  --json             one JSON array: [{provider, ok, init_ms, check_ms,\n"
          "                     checked, detail, error}]\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n", f);
}

static double ms(uint64_t us)
{
    return (double)us / 1000.0;
}

/* Milliseconds as a JSON number with two decimals. */
static json_object *ms_json(uint64_t us)
{
    char text[32];
    snprintf(text, sizeof text, "%.2f", ms(us));
    return json_object_new_double_s(ms(us), text);
}

/* Check one provider; prints its line (or adds its object to arr). */
static bool check_one(sbx_ctx *ctx, const char *name, json_object *arr)
{
    sbx_provider *p;
    sbx_error err;
    struct sbx_health h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    int rc = sbx_provider_lookup(ctx, name, &p, &err);
    if (rc == SBX_OK)
        rc = sbx_provider_health(p, cli_run_cancel(), &h, &err);
    if (arr) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "provider", json_object_new_string(name));
        json_object_object_add(o, "ok", json_object_new_boolean(rc == SBX_OK));
        json_object_object_add(o, "init_ms", ms_json(h.init_us));
        json_object_object_add(o, "check_ms", ms_json(h.check_us));
        json_object_object_add(o, "checked", json_object_new_boolean(h.checked));
        json_object_object_add(o, "detail",
                               rc == SBX_OK ? json_object_new_string(h.detail) : NULL);
        json_object_object_add(o, "error",
                               rc == SBX_OK ? NULL : json_object_new_string(err.message));
        json_object_array_add(arr, o);
    } else if (rc == SBX_OK) {
        printf("ok    %-12s init %7.1f ms  check %7.1f ms  %s\n", name, ms(h.init_us),
               ms(h.check_us), h.detail);
    } else {
        printf("FAIL  %-12s %s\n", name, err.message);
    }
    return rc == SBX_OK;
}

int cmd_health(const struct cli_globals *g, int argc, char **argv)
{
    int json = 0;
    const struct option longopts[] = {
        {"json", no_argument, &json, 1},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"health", CLI_EXIT_USAGE, usage, ":c:h", longopts,
                                    NULL, NULL, &globals};
    int status = cli_parse_options(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    const char *only = optind < argc ? argv[optind++] : NULL;
    if ((status = cli_no_more_arguments(&cmd, argc, argv, optind)) != CLI_EXIT_OK)
        return status;
    sbx_ctx *ctx;
    if (cli_open_lenient(&globals, &ctx) != SBX_OK)
        return CLI_EXIT_FAIL;
    if (cli_interrupt_setup() != SBX_OK) {
        sbx_close(ctx);
        return CLI_EXIT_FAIL;
    }
    json_object *arr = json ? json_object_new_array() : NULL;
    bool all_ok = true, found = !only;
    for (size_t i = 0; i < sbx_provider_count(ctx); i++) {
        const char *name = sbx_provider_name_at(ctx, i);
        if (only && strcmp(only, name))
            continue;
        found = true;
        all_ok &= check_one(ctx, name, arr);
    }
    /* enabled providers that could not even be loaded */
    int bstatus;
    const char *why, *bname;
    for (size_t i = 0; (bname = sbx_broken_provider_at(ctx, i, &bstatus, &why)) != NULL; i++) {
        if (only && strcmp(only, bname))
            continue;
        found = true;
        all_ok = false;
        if (arr) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "provider", json_object_new_string(bname));
            json_object_object_add(o, "ok", json_object_new_boolean(false));
            json_object_object_add(o, "error", json_object_new_string(why));
            json_object_array_add(arr, o);
        } else
            printf("FAIL  %-12s %s\n", bname, why);
    }
    if (!found) {
        cli_error("health: provider \"%s\" is not enabled (see sbx providers)", only);
        all_ok = false;
    }
    if (arr) {
        printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(arr);
    }
    cli_interrupt_teardown();
    sbx_close(ctx);
    if (fflush(stdout) != 0)
        all_ok = false;
    return all_ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
