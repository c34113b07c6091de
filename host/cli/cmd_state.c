/*
 * cmd_state.c - `sbx state SESSION` (what a later process needs to
 * reconnect, as JSON) and `sbx resume SESSION [--manifest FILE]` (reconnect
 * only with the session's trusted manifest).
 */
#include "cli.h"

#include <json-c/json.h>
#include <string.h>

static void state_usage(FILE *f)
{
    fputs("Usage: sbx state [OPTIONS] SESSION\n"
          "\n"
          "Print, as one JSON object, what a later process needs to reconnect to\n"
          "session SESSION: provider, reference (the provider's opaque id),\n"
          "spec_hash, manifest_digest (null without a manifest), run_as (the user\n"
          "every command and file operation acts as; null for the default),\n"
          "created_at (ms since the epoch), deleting, paused, last_used_at (ms\n"
          "since the epoch). It holds no credential and no host path.\n"
          "\n"
          "Options:\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed.\n", f);
}

static void resume_usage(FILE *f)
{
    fputs("Usage: sbx resume [OPTIONS] SESSION\n"
          "\n"
          "Reconnect to the sandbox of session SESSION and check it is there;\n"
          "a paused sandbox (sbx pause, idle eviction) is resumed. Prints\n"
          "'resumed'. Refused unless the manifest given is the one the\n"
          "session was provisioned with (same digest), or none is given for a\n"
          "session made without one.\n"
          "\n"
          "Options:\n"
          "  -m, --manifest FILE  the session's trusted manifest\n"
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed or refused.\n", f);
}

static int on_option(void *ud, int c, const char *arg)
{
    if (c != 'm')
        return CLI_OPTION_UNKNOWN;
    *(const char **)ud = arg;
    return CLI_EXIT_OK;
}

static void print_state(const struct sbx_session_state *st)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "provider", json_object_new_string(st->provider));
    json_object_object_add(o, "reference", json_object_new_string(st->reference));
    json_object_object_add(o, "spec_hash", st->spec_hash[0]
                                               ? json_object_new_string(st->spec_hash)
                                               : NULL);
    json_object_object_add(o, "manifest_digest",
                           st->manifest_digest[0]
                               ? json_object_new_string(st->manifest_digest)
                               : NULL);
    json_object_object_add(o, "run_as",
                           st->run_as[0] ? json_object_new_string(st->run_as) : NULL);
    json_object_object_add(o, "created_at", json_object_new_int64(st->created_at));
    json_object_object_add(o, "deleting", json_object_new_boolean(st->deleting));
    json_object_object_add(o, "paused", json_object_new_boolean(st->paused));
    json_object_object_add(o, "last_used_at", json_object_new_int64(st->last_used_at));
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static int state_command(const struct cli_globals *g, int argc, char **argv, bool resume)
{
    static const struct option state_opts[] = {CLI_COMMON_LONGOPTS};
    static const struct option resume_opts[] = {
        {"manifest", required_argument, NULL, 'm'},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const char *manifest = NULL;
    const struct cli_command cmd = {resume ? "resume" : "state", CLI_EXIT_SBX,
                                    resume ? resume_usage : state_usage,
                                    resume ? "+:m:c:h" : "+:c:h",
                                    resume ? resume_opts : state_opts,
                                    on_option, &manifest, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK)
        status = cli_no_more_arguments(&cmd, argc, argv, rest);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(&globals, NULL, &ctx, &m) != SBX_OK)
        return CLI_EXIT_SBX;
    sbx_error err;
    int rc;
    if (resume) {
        sbx_manifest *mf = NULL;
        sbx_handle *h = NULL;
        rc = cli_manifest_load(ctx, manifest, &mf);
        if (rc == SBX_OK) {
            rc = sbx_session_resume(m, key, mf, NULL, &h, &err);
            if (rc == SBX_OK) {
                puts("resumed");
                status = CLI_EXIT_OK;
            } else {
                status = cli_session_failed(rc, &err);
            }
        } else {
            status = CLI_EXIT_SBX;
        }
        sbx_release(h);
        sbx_manifest_free(mf);
    } else {
        struct sbx_session_state st;
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        rc = sbx_session_state(m, key, &st, &err);
        if (rc == SBX_OK) {
            print_state(&st);
            status = CLI_EXIT_OK;
        } else {
            status = cli_session_failed(rc, &err);
        }
    }
    cli_sessions_close(ctx, m);
    return status;
}

int cmd_state(const struct cli_globals *g, int argc, char **argv)
{
    return state_command(g, argc, argv, false);
}

int cmd_resume(const struct cli_globals *g, int argc, char **argv)
{
    return state_command(g, argc, argv, true);
}
