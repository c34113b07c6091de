/*
 * cmd_create.c - `sbx create SESSION`: provision the sandbox of a session
 * key (or find the one it has), from a spec given as options.
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Every capability name this libsbx knows (sbx_cap_name), wrapped into
 * the option column of the help. */
static void print_cap_names(FILE *f)
{
    const int indent = 26, width = 78;
    int col = 0;
    for (int b = 0; b < 64; b++) {
        const char *n = sbx_cap_name(UINT64_C(1) << b);
        if (!n)
            continue;
        int len = (int)strlen(n);
        if (col && col + 2 + len > width) {
            fputs(",\n", f);
            col = 0;
        } else if (col) {
            fputs(", ", f);
            col += 2;
        }
        if (!col)
            col = fprintf(f, "%*s", indent, "");
        col += fprintf(f, "%s", n);
    }
    fputc('\n', f);
}

static void usage(FILE *f)
{
    fputs("Usage: sbx create [OPTIONS] SESSION\n"
          "\n"
          "Provision the sandbox of session key SESSION and record it in the\n"
          "session store; prints 'created', or 'exists' when the key already has\n"
          "one (with the same spec). Workers racing on one key end with one\n"
          "sandbox.\n"
          "\n"
          "Options:\n"
          "  -p, --provider NAME     provider of a new sandbox (else $SBX_PROVIDER,\n"
          "                          else default_provider, else local)\n"
          "  -P, --package MGR:NAME  install a package after create (repeatable);\n"
          "                          MGR is apt, cargo, gem, go, npm or pip, e.g.\n"
          "                          pip:requests==2.31.0; needs a provider with\n"
          "                          the packages capability\n"
          "  -a, --allow HOST        limit the network: deny all egress but to HOST\n"
          "                          (a host name or *.domain; repeatable); needs\n"
          "                          a provider with the egress capability\n"
          "  -A, --setup-allow HOST  also allow HOST while packages install\n"
          "  -N, --no-network        limit the network with nothing allowed\n"
          "  -m, --manifest FILE     materialize this workspace manifest after\n"
          "                          create (docs/MANIFEST.md); part of the spec\n"
          "  -M, --memory SLUG[:ro|:rw]  show memory store SLUG at /mnt/memory/SLUG\n"
          "                          (repeatable; read-only unless :rw); changes\n"
          "                          of a read-write one are committed after each\n"
          "                          command (docs/MEMORY.md); needs a provider\n"
          "                          with the memory capability\n"
          "  -s, --from-snapshot FILE  restore this snapshot into the new\n"
          "                          workspace before the session is recorded\n"
          "                          (a failed restore leaves no session; one\n"
          "                          that exists is not touched: an error)\n"
          "      --port PORT         make TCP port PORT of the sandbox reachable\n"
          "                          from outside (repeatable, at most 64; 'sbx\n"
          "                          port' tells where); needs a provider with the\n"
          "                          ports capability; replaces session.ports of\n"
          "                          the configuration\n"
          "  -r, --require CAP       the session will use capability CAP\n"
          "                          (repeatable), one of:\n", f);
    print_cap_names(f);
    fputs("  -c, --config FILE       read this configuration file\n"
          "  -h, --help              show this help\n"
          "\n"
          "A spec that differs from the one the session was created with is an\n"
          "error: it is not applied (destroy the session to recreate it).\n"
          "Exit status: 0 on success, 125 when sbx failed.\n", f);
}

/* The capability bits this libsbx has a name for. */
static uint64_t known_caps(void)
{
    uint64_t caps = 0;
    for (int b = 0; b < 64; b++)
        if (sbx_cap_name(UINT64_C(1) << b))
            caps |= UINT64_C(1) << b;
    return caps;
}

static int parse_cap(const char *name, uint64_t *caps)
{
    for (int b = 0; b < 64; b++) {
        const char *n = sbx_cap_name(UINT64_C(1) << b);
        if (n && !strcmp(n, name)) {
            *caps |= UINT64_C(1) << b;
            return 0;
        }
    }
    return -1;
}

static int create(const struct cli_globals *g, const char *key,
                  struct sbx_session_spec *spec, const char *manifest_path,
                  const char *snapshot)
{
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(g, spec->provider, &ctx, &m) != SBX_OK)
        return cli_failure_status();
    sbx_manifest *mf = NULL;
    if (cli_manifest_load(ctx, manifest_path, &mf) != SBX_OK) {
        cli_sessions_close(ctx, m);
        return cli_failure_status();
    }
    spec->manifest = mf;
    /* restored by the session manager before the session is published */
    spec->snapshot = snapshot;
    sbx_handle *h = NULL;
    struct sbx_acquire_info info;
    info.size = sizeof info;
    sbx_error err;
    int status = CLI_EXIT_OK;
    int rc = sbx_session_acquire(m, key, spec, cli_run_cancel(), &h, &info, &err);
    if (rc != SBX_OK) {
        status = cli_session_failed(rc, &err);
    } else if (info.spec_changed) {
        char want[SBX_KEY_HASH_LEN + 1];
        sbx_session_spec_hash(spec, want, &err);
        cli_error("session exists with another spec (recorded %.12s, requested "
                  "%.12s): the change is not applied; destroy the session to "
                  "recreate it", info.recorded_spec_hash[0] ? info.recorded_spec_hash
                                                            : "none",
                  want);
        status = CLI_EXIT_SBX;
    } else if (snapshot && !info.created) {
        cli_error("session exists: the snapshot is not restored into it (use 'sbx "
                  "restore')");
        status = CLI_EXIT_SBX;
    } else {
        printf("%s\n", info.created ? "created" : "exists");
    }
    sbx_release(h);
    sbx_manifest_free(mf);
    spec->manifest = NULL;
    cli_sessions_close(ctx, m);
    return status;
}

/* getopt code of --port (long only) */
#define OPT_PORT 0x100

int cli_port_option(const char *cmd, const char *arg, uint16_t ports[SBX_SESSION_PORTS_MAX],
                    size_t *n)
{
    char *end = NULL;
    unsigned long v = arg[0] >= '0' && arg[0] <= '9' ? strtoul(arg, &end, 10) : 0;
    if (!end || *end || v < 1 || v > 65535)
        return cli_usage_error(cmd, CLI_EXIT_SBX, "--port %s: not a TCP port (1 to 65535)",
                               arg);
    for (size_t i = 0; i < *n; i++)
        if (ports[i] == v)
            return cli_usage_error(cmd, CLI_EXIT_SBX, "--port %lu is given twice", v);
    if (*n == SBX_SESSION_PORTS_MAX)
        return cli_usage_error(cmd, CLI_EXIT_SBX, "more than %d --port options",
                               SBX_SESSION_PORTS_MAX);
    ports[(*n)++] = (uint16_t)v;
    return CLI_EXIT_OK;
}

struct create_args {
    struct sbx_session_spec *spec;
    uint16_t ports[SBX_SESSION_PORTS_MAX];
    struct sbx_memory_attachment *memory;
    struct sbx_package *pkgs;
    const char **allow, **setup_allow;
    const char *manifest;
    const char *snapshot;
};

static int on_option(void *ud, int c, const char *arg)
{
    struct create_args *a = ud;
    sbx_error err;
    switch (c) {
    case 'p':
        a->spec->provider = arg;
        return CLI_EXIT_OK;
    case 'P':
        if (sbx_package_parse(arg, &a->pkgs[a->spec->npackages], &err) != SBX_OK)
            return cli_usage_error("create", CLI_EXIT_SBX, "%s", err.message);
        a->spec->npackages++;
        return CLI_EXIT_OK;
    case 'a':
        a->spec->limited_network = true;
        a->allow[a->spec->nallow++] = arg;
        return CLI_EXIT_OK;
    case 'A':
        a->spec->limited_network = true;
        a->setup_allow[a->spec->nsetup_allow++] = arg;
        return CLI_EXIT_OK;
    case 'N':
        a->spec->limited_network = true;
        return CLI_EXIT_OK;
    case 'm':
        a->manifest = arg;
        return CLI_EXIT_OK;
    case 'M': {
        struct sbx_memory_attachment *m = &a->memory[a->spec->nmemory];
        m->size = sizeof *m;
        m->access = SBX_MEMORY_READ_ONLY;
        char *colon = strrchr(arg, ':');
        if (colon && !strcmp(colon, ":rw"))
            m->access = SBX_MEMORY_READ_WRITE;
        else if (colon && strcmp(colon, ":ro"))
            return cli_usage_error("create", CLI_EXIT_SBX,
                                   "--memory %s: expected SLUG, SLUG:ro or SLUG:rw", arg);
        if (colon)
            *colon = '\0'; /* argv is ours to cut */
        m->slug = arg;
        a->spec->nmemory++;
        return CLI_EXIT_OK;
    }
    case 's':
        a->snapshot = arg;
        return CLI_EXIT_OK;
    case OPT_PORT: {
        int rc = cli_port_option("create", arg, a->ports, &a->spec->nports);
        a->spec->ports = a->ports;
        return rc;
    }
    case 'r':
        if (parse_cap(arg, &a->spec->caps) != 0)
        {
            char names[256];
            return cli_usage_error("create", CLI_EXIT_SBX,
                                   "unknown capability '%s' (expected one of %s)",
                                   arg, cli_caps_text(known_caps(), names,
                                                      sizeof names));
        }
        return CLI_EXIT_OK;
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

int cmd_create(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"package", required_argument, NULL, 'P'},
        {"require", required_argument, NULL, 'r'},
        {"allow", required_argument, NULL, 'a'},
        {"setup-allow", required_argument, NULL, 'A'},
        {"no-network", no_argument, NULL, 'N'},
        {"manifest", required_argument, NULL, 'm'},
        {"memory", required_argument, NULL, 'M'},
        {"from-snapshot", required_argument, NULL, 's'},
        {"port", required_argument, NULL, OPT_PORT},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    /* Every --package fits: at most one per argument. */
    struct sbx_package *pkgs = calloc((size_t)argc + 1, sizeof *pkgs);
    if (!pkgs) {
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    spec.packages = pkgs;
    const char **allow = calloc((size_t)argc + 1, sizeof *allow);
    const char **setup = calloc((size_t)argc + 1, sizeof *setup);
    if (!allow || !setup) {
        free(pkgs);
        free(allow);
        free(setup);
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    spec.allow = allow;
    spec.setup_allow = setup;
    struct sbx_memory_attachment *memory = calloc((size_t)argc + 1, sizeof *memory);
    if (!memory) {
        free(pkgs);
        free(allow);
        free(setup);
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    spec.memory = memory;
    struct create_args a = {.spec = &spec, .memory = memory, .pkgs = pkgs,
                            .allow = allow, .setup_allow = setup};
    const struct cli_command cmd = {"create", CLI_EXIT_SBX, usage, "+:p:P:a:A:Nm:M:s:r:c:h",
                                    longopts, on_option, &a, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK)
        status = cli_no_more_arguments(&cmd, argc, argv, rest);
    if (status == CLI_EXIT_OK) {
        if (cli_interrupt_setup() != SBX_OK) {
            status = CLI_EXIT_SBX;
        } else {
            status = create(&globals, key, &spec, a.manifest, a.snapshot);
            cli_interrupt_teardown();
        }
    }
    free(pkgs);
    free(allow);
    free(setup);
    free(memory);
    return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
}
