/*
 * cmd_run.c - `sbx run`: create a sandbox under a fresh random session key,
 * run one command in it with its output streamed live to our stdout and
 * stderr (cli_exec.c), then destroy the sandbox, also when interrupted.
 * When warm pools are configured the sandbox is a session's instead, so
 * that a matching pool's ready member is claimed (run_in_session).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

struct run_options {
    const char *provider;
    const char *manifest;
    uint16_t ports[SBX_SESSION_PORTS_MAX + 1]; /* 0-terminated */
    size_t nports;
    struct cli_exec_options exec;
};

static void usage(FILE *f)
{
    fputs("Usage: sbx run [OPTIONS] [--] COMMAND [ARGS...]\n"
          "\n"
          "Create a sandbox with a fresh session key, run COMMAND in its\n"
          "workspace with output streamed live, then destroy the sandbox (also\n"
          "on Ctrl-C or SIGTERM). No shell is involved: use 'sh -c' for one.\n"
          "\n"
          "Options:\n"
          "  -p, --provider NAME  use this provider (else $SBX_PROVIDER, else\n"
          "                       default_provider, else local)\n"
          "  -m, --manifest FILE  materialize this workspace manifest first and\n"
          "                       run COMMAND with its environment\n"
          "      --port PORT      make TCP port PORT of the sandbox reachable from\n"
          "                       outside (repeatable); where is printed to stderr\n"
          "                       before COMMAND runs\n"
          CLI_EXEC_OPTIONS_HELP
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          CLI_EXEC_EXIT_HELP, f);
}

static int on_option(void *ud, int c, const char *arg)
{
    struct run_options *ro = ud;
    if (c == 0x100) /* --port */
        return cli_port_option("run", arg, ro->ports, &ro->nports);
    if (c == 'm') {
        ro->manifest = arg;
        return CLI_EXIT_OK;
    }
    if (c != 'p')
        return cli_exec_option("run", c, arg, &ro->exec);
    ro->provider = arg;
    return CLI_EXIT_OK;
}

static int parse_options(int argc, char **argv, struct cli_globals *globals,
                         struct run_options *ro)
{
    static const struct option longopts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"manifest", required_argument, NULL, 'm'},
        {"port", required_argument, NULL, 0x100},
        CLI_EXEC_LONGOPTS,
        CLI_COMMON_LONGOPTS,
    };
    const struct cli_command cmd = {"run", CLI_EXIT_SBX, usage,
                                    "+:p:m:" CLI_EXEC_SHORTOPTS "c:h", longopts,
                                    on_option, ro, globals};
    int status = cli_parse_options(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status;
    if (optind >= argc)
        return cli_usage_error("run", CLI_EXIT_SBX,
                               "missing command (usage: sbx run [OPTIONS] -- "
                               "COMMAND [ARGS...])");
    if (argv[optind][0] == '\0')
        return cli_usage_error("run", CLI_EXIT_SBX, "the command name is empty");
    return CLI_EXIT_OK;
}

/* A session key nobody else will use: 128 random bits. */
static int make_session_key(char *out, size_t len)
{
    unsigned char raw[16];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    size_t used = (size_t)snprintf(out, len, "sbx-run-");
    for (size_t i = 0; i < sizeof raw && used + 2 < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%02x", raw[i]);
    return 0;
}

/* Create, exec, destroy. Returns the exit status. */
static int run_in_sandbox(sbx_provider *p, const struct run_options *ro,
                          const sbx_manifest *mf, char *const *cmd)
{
    if (cli_caught_signal())
        return CLI_EXIT_SIGNAL + cli_caught_signal();
    char key[64];
    if (make_session_key(key, sizeof key) != 0) {
        cli_error("cannot make a session key: getrandom: %s", strerror(errno));
        return CLI_EXIT_SBX;
    }
    struct sbx_create_options copts;
    memset(&copts, 0, sizeof copts);
    copts.size = sizeof copts;
    /* users, groups, run_as: refused at admission, before anything is
     * made, by a provider without them */
    if (mf && sbx_manifest_has_users(mf))
        copts.caps_required |= SBX_CAP_USERS;
    copts.ports = ro->nports ? ro->ports : NULL; /* SBX_CAP_PORTS is then required */
    sbx_handle *h;
    sbx_error err;
    int rc = sbx_create(p, key, &copts, cli_run_cancel(), &h, &err);
    if (rc != SBX_OK) {
        if (cli_caught_signal())
            return CLI_EXIT_SIGNAL + cli_caught_signal();
        cli_error("%s", err.message);
        return CLI_EXIT_SBX;
    }
    char *ref = strdup(sbx_handle_ref(h));
    if (!ref) {
        sbx_release(h);
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    /* where each declared port is reached, before the command starts */
    for (size_t i = 0; i < ro->nports; i++) {
        struct sbx_port_endpoint ep = {.size = sizeof ep};
        if (sbx_port_resolve(h, ro->ports[i], &ep, cli_run_cancel(), &err) == SBX_OK)
            fprintf(stderr, "sbx: port %u: %s\n", (unsigned)ro->ports[i],
                    ep.url[0] ? ep.url : ep.host);
        else
            cli_error("port %u: %s", (unsigned)ro->ports[i], err.message);
    }
    int status;
    struct cli_exec_options eo = ro->exec;
    const char **env = NULL;
    if (mf && ((rc = sbx_manifest_apply(h, mf, cli_run_cancel(), &err)) != SBX_OK ||
               (rc = sbx_handle_set_user(h, sbx_manifest_run_as(mf), &err)) != SBX_OK)) {
        status = CLI_EXIT_SIGNAL + cli_caught_signal();
        if (!cli_caught_signal()) {
            cli_error("%s", err.message);
            status = CLI_EXIT_SBX;
        }
    } else if (mf && !(env = cli_manifest_env(mf, &ro->exec))) {
        cli_error("out of memory");
        status = CLI_EXIT_SBX;
    } else {
        if (env) {
            eo.env = env;
            for (eo.nenv = 0; env[eo.nenv]; eo.nenv++)
                ;
        }
        status = cli_exec_streamed(h, &eo, cmd);
    }
    free(env);
    sbx_release(h);

    rc = sbx_destroy(p, key, ref, cli_cleanup_cancel(), &err);
    if (rc != SBX_OK) {
        cli_error("cannot destroy the sandbox (provider %s, reference %s): %s",
                  sbx_provider_info_name(sbx_provider_get_info(p)), ref, err.message);
        status = CLI_EXIT_SBX;
    }
    free(ref);
    return status;
}

/*
 * With warm pools configured: the sandbox is a session's under the fresh
 * key (sbx_session_acquire, which claims a ready member of a matching
 * pool, else creates cold), deleted after the command. Returns the exit
 * status.
 */
static int run_in_session(sbx_ctx *ctx, const struct run_options *ro,
                          const sbx_manifest *mf, char *const *cmd)
{
    if (cli_caught_signal())
        return CLI_EXIT_SIGNAL + cli_caught_signal();
    char key[64];
    if (make_session_key(key, sizeof key) != 0) {
        cli_error("cannot make a session key: getrandom: %s", strerror(errno));
        return CLI_EXIT_SBX;
    }
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    sbx_sessions *m;
    sbx_error err;
    if (sbx_sessions_open(ctx, &so, &m, &err) != SBX_OK) {
        cli_error("%s", err.message);
        return CLI_EXIT_SBX;
    }
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.provider = ro->provider;
    spec.manifest = mf;
    spec.ports = ro->nports ? ro->ports : NULL;
    spec.nports = ro->nports;
    sbx_handle *h;
    int status;
    int rc = sbx_session_acquire(m, key, &spec, cli_run_cancel(), &h, NULL, &err);
    if (rc != SBX_OK) {
        status = CLI_EXIT_SIGNAL + cli_caught_signal();
        if (!cli_caught_signal()) {
            cli_error("%s", err.message);
            status = CLI_EXIT_SBX;
        }
        /* whatever the failed acquire left is the session's to delete */
        sbx_session_delete(m, key, cli_cleanup_cancel(), &err);
        sbx_sessions_close(m);
        return status;
    }
    for (size_t i = 0; i < ro->nports; i++) {
        struct sbx_port_endpoint ep = {.size = sizeof ep};
        if (sbx_port_resolve(h, ro->ports[i], &ep, cli_run_cancel(), &err) == SBX_OK)
            fprintf(stderr, "sbx: port %u: %s\n", (unsigned)ro->ports[i],
                    ep.url[0] ? ep.url : ep.host);
        else
            cli_error("port %u: %s", (unsigned)ro->ports[i], err.message);
    }
    struct cli_exec_options eo = ro->exec;
    const char **env = NULL;
    if (mf && !(env = cli_manifest_env(mf, &ro->exec))) {
        cli_error("out of memory");
        status = CLI_EXIT_SBX;
    } else {
        if (env) {
            eo.env = env;
            for (eo.nenv = 0; env[eo.nenv]; eo.nenv++)
                ;
        }
        status = cli_exec_streamed(h, &eo, cmd);
    }
    free(env);
    sbx_release(h);
    if (sbx_session_delete(m, key, cli_cleanup_cancel(), &err) != SBX_OK) {
        cli_error("cannot delete the run's session: %s (left for 'sbx reconcile')",
                  err.message);
        status = CLI_EXIT_SBX;
    }
    sbx_sessions_close(m);
    return status;
}

int cmd_run(const struct cli_globals *g, int argc, char **argv)
{
    struct cli_globals globals = *g;
    struct run_options ro;
    memset(&ro, 0, sizeof ro);
    /* Every --env fits: at most one per argument. */
    ro.exec.env = calloc((size_t)argc + 1, sizeof *ro.exec.env);
    if (!ro.exec.env) {
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    int status = parse_options(argc, argv, &globals, &ro);
    if (status != CLI_EXIT_OK) {
        free(ro.exec.env);
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    }
    char *const *cmd = argv + optind;

    if (cli_interrupt_setup() != SBX_OK) {
        free(ro.exec.env);
        return CLI_EXIT_SBX;
    }
    sbx_ctx *ctx = NULL;
    sbx_provider *p;
    sbx_error err;
    if (cli_open(&globals, ro.provider, &ctx) != SBX_OK) {
        status = cli_failure_status();
    } else if (sbx_provider_lookup(ctx, ro.provider, &p, &err) != SBX_OK) {
        cli_error("%s", err.message);
        status = CLI_EXIT_SBX;
    } else {
        sbx_manifest *mf = NULL;
        status = cli_manifest_load(ctx, ro.manifest, &mf) != SBX_OK
                     ? cli_failure_status()
                     : sbx_config_pool_count(ctx) ? run_in_session(ctx, &ro, mf, cmd)
                                                  : run_in_sandbox(p, &ro, mf, cmd);
        sbx_manifest_free(mf);
    }
    sbx_close(ctx);
    cli_interrupt_teardown();
    free(ro.exec.env);
    return status;
}
