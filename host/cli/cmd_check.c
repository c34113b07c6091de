/*
 * cmd_check.c - `sbx check`: validate the configuration and the descriptor
 * of every enabled provider, exactly as a service would at startup.
 *
 * By default nothing beyond sbx_provider_describe runs (no credentials, no
 * network), so a check can run before the backends are reachable. --init
 * additionally initializes each provider.
 */
#include "cli.h"

#include <getopt.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx check [--init]\n"
          "\n"
          "Validate the configuration and every enabled provider's plugin\n"
          "(ABI version, sizes, name, capabilities, configuration keys).\n"
          "Prints one 'ok' line per enabled provider (with its isolation; a\n"
          "provider that is not a security boundary gets a warning) and exits 0,\n"
          "or prints every problem (file:line for configuration errors, one line\n"
          "per broken provider) and exits 1.\n"
          "Under each provider, every key that falls back to the service's own\n"
          "environment variable shows its value and where it came from:\n"
          "[config], [env VAR] or [default; VAR not set] (credentials only as\n"
          "set or unset).\n"
          "\n"
          "Options:\n"
          "  --init             also initialize each provider (reads its\n"
          "                     credentials, may contact its backend)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n", f);
}

/* value into buf with the user info of a URL ("https://user:pass@host")
 * masked: a URL may carry a credential. */
static const char *mask_userinfo(const char *value, char *buf, size_t cap)
{
    const char *s = strstr(value, "://");
    if (!s)
        return value;
    const char *h = s + 3;
    size_t hl = strcspn(h, "/?#");
    const char *at = memchr(h, '@', hl);
    if (!at)
        return value;
    snprintf(buf, cap, "%.*s***%s", (int)(h - value), value, at);
    return buf;
}

/* One line per key that has a service environment variable as its
 * fallback: its value (a credential only as set/unset) and where it came
 * from, as the provider reads it (configuration, then environment, then
 * default). */
static void print_origins(const sbx_provider *p)
{
    const char *key, *env, *value;
    int origin;
    bool secret;
    for (size_t i = 0; sbx_provider_config_origin(p, i, &key, &env, &origin, &value, &secret);
         i++) {
        if (!env)
            continue;
        char masked[512];
        const char *shown = secret ? (origin == SBX_ORIGIN_DEFAULT ? "unset" : "set")
                            : origin == SBX_ORIGIN_DEFAULT ? "(default)"
                            : value ? mask_userinfo(value, masked, sizeof masked)
                                    : "(set)";
        if (origin == SBX_ORIGIN_ENV)
            printf("    %-18s %s  [env %s]\n", key, shown, env);
        else if (origin == SBX_ORIGIN_CONFIG)
            printf("    %-18s %s  [config]\n", key, shown);
        else
            printf("    %-18s %s  [default; %s not set]\n", key, shown, env);
    }
}

int cmd_check(const struct cli_globals *g, int argc, char **argv)
{
    int init = 0;
    const struct option longopts[] = {
        {"init", no_argument, &init, 1},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"check", CLI_EXIT_USAGE, usage, "+:c:h", longopts,
                                    NULL, NULL, &globals};
    int status = cli_parse_no_operands(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;

    sbx_ctx *ctx;
    if (cli_open_lenient(&globals, &ctx) != SBX_OK)
        return CLI_EXIT_FAIL;
    const char *def = sbx_default_provider(ctx);
    /* Every enabled provider that could not be loaded, each on its own. */
    int bstatus;
    const char *why;
    for (size_t i = 0; sbx_broken_provider_at(ctx, i, &bstatus, &why) != NULL; i++) {
        cli_error("%s", why);
        status = CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < sbx_provider_count(ctx); i++) {
        const char *name = sbx_provider_name_at(ctx, i);
        sbx_provider *p;
        sbx_error err;
        if (sbx_provider_lookup(ctx, name, &p, &err) != SBX_OK ||
            (init && sbx_provider_ready(p, NULL, &err) != SBX_OK)) {
            cli_error("%s", err.message);
            status = CLI_EXIT_FAIL;
            continue;
        }
        const sbx_provider_info *d = sbx_provider_get_info(p);
        char caps[256];
        unsigned major = 0, minor = 0;
        sbx_provider_info_abi(d, &major, &minor);
        printf("ok  %s %s (ABI %u.%u, isolation: %s, capabilities: %s)%s%s  %s\n",
               name, sbx_provider_info_version(d), major, minor,
               cli_isolation_text((uint32_t)sbx_provider_info_isolation(d)),
               cli_caps_text(sbx_provider_info_caps(d), caps, sizeof caps),
               init ? ", initialized" : "", strcmp(name, def) ? "" : " [default]",
               sbx_provider_path(p));
        print_origins(p);
        if (sbx_provider_info_isolation(d) == SBX_ISOLATION_NONE)
            printf("    warning: %s runs commands on this host with your privileges: "
                   "not a security boundary\n", name);
    }
    sbx_close(ctx);
    if (fflush(stdout) != 0)
        status = CLI_EXIT_FAIL;
    return status;
}
