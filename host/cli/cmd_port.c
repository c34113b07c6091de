/*
 * cmd_port.c - `sbx port SESSION PORT`: where a client outside the
 * sandbox reaches a port declared when the session was created
 * (SBX_CAP_PORTS, sbx_port_resolve).
 *
 * The endpoint's header (a preview token some services require) is a
 * credential: it is printed only with --json, on stdout, and never in a
 * message.
 */
#include "cmd_proc.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx port [OPTIONS] SESSION PORT\n"
          "\n"
          "Print the URL at which a client outside session SESSION's sandbox\n"
          "reaches its TCP port PORT (declared when the session was created).\n"
          "\n"
          "Options:\n"
          "      --json         one JSON object: port, host, tls, url, and the\n"
          "                     request header the service requires (a\n"
          "                     credential; null when none)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed (a port not declared, a\n"
          "provider without ports).\n", f);
}

enum { OPT_JSON = 0x100 };

static int on_option(void *ud, int c, const char *arg)
{
    (void)arg;
    if (c != OPT_JSON)
        return CLI_OPTION_UNKNOWN;
    *(bool *)ud = true;
    return CLI_EXIT_OK;
}

int cmd_port(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    bool json = false;
    const struct cli_command cmd = {"port", CLI_EXIT_SBX, usage, "+:c:h", longopts,
                                    on_option, &json, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK && rest >= argc)
        status = cli_usage_error("port", CLI_EXIT_SBX, "missing PORT");
    if (status == CLI_EXIT_OK) {
        int k = rest;
        status = cli_parse_options(&cmd, argc - k, argv + k);
        if (status == CLI_EXIT_OK)
            status = cli_no_more_arguments(&cmd, argc, argv, k + optind);
    }
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    const char *text = argv[rest];
    char *end;
    unsigned long port = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end || port < 1 || port > 65535)
        return cli_usage_error("port", CLI_EXIT_SBX,
                               "invalid PORT '%.16s' (expected a TCP port, 1 to 65535)",
                               text);
    struct cli_session s;
    if ((status = cli_session_open_existing(&globals, key, &s)) != CLI_EXIT_OK)
        return status;
    struct sbx_port_endpoint ep;
    memset(&ep, 0, sizeof ep);
    ep.size = sizeof ep;
    sbx_error err;
    int rc = sbx_port_resolve(s.h, (unsigned)port, &ep, NULL, &err);
    if (rc != SBX_OK) {
        status = cli_session_failed(rc, &err);
    } else if (json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "port", json_object_new_int(ep.port));
        json_object_object_add(o, "host", cli_json_text(ep.host, strnlen(ep.host, sizeof ep.host)));
        json_object_object_add(o, "tls", json_object_new_boolean(ep.tls != 0));
        json_object_object_add(o, "url", cli_json_text(ep.url, strnlen(ep.url, sizeof ep.url)));
        size_t hl = strnlen(ep.header, sizeof ep.header);
        json_object_object_add(o, "header", hl ? cli_json_text(ep.header, hl) : NULL);
        cli_json_print(o);
    } else {
        printf("%.*s\n", (int)strnlen(ep.url, sizeof ep.url), ep.url);
    }
    /* the header may be a token: do not leave it in memory longer */
    memset(ep.header, 0, sizeof ep.header);
    cli_session_close(&s);
    return status;
}
