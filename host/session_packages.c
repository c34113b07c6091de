/*
 * session_packages.c - installing a spec's environment packages in a fresh
 * sandbox. Everything runs through the provider's exec as argument vectors:
 * no shell ever sees a package name.
 */
#include "session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How each manager is checked for and how it installs. */
struct manager_cmds {
    const char *const *check;   /* prints a version when the manager is there */
    const char *const *refresh; /* run once before installing, or NULL */
    const char *const *install; /* prefix; the package names follow */
    const char *const *env;     /* extra environment, or NULL */
};

static const char *const apt_check[] = {"apt-get", "--version", NULL};
static const char *const apt_refresh[] = {"apt-get", "update", NULL};
static const char *const apt_install[] = {"apt-get", "install", "-y",
                                          "--no-install-recommends", NULL};
static const char *const apt_env[] = {"DEBIAN_FRONTEND=noninteractive", NULL};
static const char *const cargo_check[] = {"cargo", "--version", NULL};
static const char *const cargo_install[] = {"cargo", "install", NULL};
static const char *const gem_check[] = {"gem", "--version", NULL};
static const char *const gem_install[] = {"gem", "install", "--no-document", NULL};
static const char *const go_check[] = {"go", "version", NULL};
static const char *const go_install[] = {"go", "install", NULL};
static const char *const npm_check[] = {"npm", "--version", NULL};
static const char *const npm_install[] = {"npm", "install", "--global", NULL};
static const char *const pip_check[] = {"pip", "--version", NULL};
static const char *const pip_install[] = {"pip", "install", "--no-input", NULL};

static const struct manager_cmds managers[] = {
    [SBX_PKG_APT] = {apt_check, apt_refresh, apt_install, apt_env},
    [SBX_PKG_CARGO] = {cargo_check, NULL, cargo_install, NULL},
    [SBX_PKG_GEM] = {gem_check, NULL, gem_install, NULL},
    [SBX_PKG_GO] = {go_check, NULL, go_install, NULL},
    [SBX_PKG_NPM] = {npm_check, NULL, npm_install, NULL},
    [SBX_PKG_PIP] = {pip_check, NULL, pip_install, NULL},
};

static size_t argv_len(const char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

/* Run argv; SBX_OK only when it exited 0. A failure's message names the
 * manager and quotes the end of the command's error output. */
static int run(sbx_handle *h, const char *mgr, const char *const *argv,
               const char *const *env, sbx_cancel *cancel, sbx_error *err)
{
    sbx_capture out, errs;
    sbx_capture_init(&out, 0, 1024);
    sbx_capture_init(&errs, 0, 1024);
    struct sbx_sink out_sink = sbx_capture_sink(&out);
    struct sbx_sink err_sink = sbx_capture_sink(&errs);
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = argv;
    args.env = env;
    args.out = &out_sink;
    args.err = &err_sink;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error why;
    int rc = sbx_exec(h, &args, &res, cancel, &why);
    if (rc == SBX_E_NO_COMMAND) {
        rc = sbx_error_set(err, SBX_E_NO_COMMAND,
                           "%s packages: package manager '%s' is not installed in "
                           "the sandbox", mgr, argv[0]);
    } else if (rc != SBX_OK) {
        rc = sbx_error_set(err, rc, "%s packages: %s", mgr, why.message);
    } else if (res.exit_code != 0 || res.term_signal || res.timed_out) {
        const sbx_capture *c = errs.total ? &errs : &out;
        char *text = sbx_capture_text(c);
        size_t tl = text ? strlen(text) : 0;
        while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == '\r'))
            text[--tl] = '\0';
        const char *what = argv[1] && !strcmp(argv[1], "--version") ? "check" : "command";
        if (res.term_signal)
            rc = sbx_error_set(err, SBX_E_IO,
                               "%s packages: %s '%s %s' was killed by signal %d: %s",
                               mgr, what, argv[0], argv[1] ? argv[1] : "",
                               res.term_signal, text ? text : "");
        else
            rc = sbx_error_set(err, SBX_E_IO,
                               "%s packages: %s '%s %s' exited with status %d: %s",
                               mgr, what, argv[0], argv[1] ? argv[1] : "",
                               res.exit_code, text ? text : "");
        free(text);
    }
    sbx_capture_free(&out);
    sbx_capture_free(&errs);
    return rc;
}

/* Install every package of `manager` in one command. */
static int install_manager(sbx_handle *h, const struct sbx_session_spec *spec,
                           int manager, sbx_cancel *cancel, sbx_error *err)
{
    const char *mgr = sbx_package_manager_name(manager);
    const struct manager_cmds *c = &managers[manager];
    int rc = run(h, mgr, c->check, c->env, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (c->refresh && (rc = run(h, mgr, c->refresh, c->env, cancel, err)) != SBX_OK)
        return rc;
    size_t prefix = argv_len(c->install);
    const char **argv = calloc(prefix + spec->npackages + 1, sizeof *argv);
    if (!argv)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < prefix; i++)
        argv[n++] = c->install[i];
    for (size_t i = 0; i < spec->npackages; i++)
        if (spec->packages[i].manager == manager)
            argv[n++] = spec->packages[i].name;
    argv[n] = NULL;
    rc = run(h, mgr, argv, c->env, cancel, err);
    free(argv);
    return rc;
}

int sbx_session_install_packages(sbx_handle *h, const struct sbx_session_spec *spec,
                                 int (*progress)(void *ud, const char *manager,
                                                 sbx_error *err),
                                 void *ud, sbx_cancel *cancel, sbx_error *err)
{
    if (!spec || spec->npackages == 0)
        return SBX_OK;
    bool done[sizeof managers / sizeof managers[0]] = {false};
    for (size_t i = 0; i < spec->npackages; i++) {
        int manager = spec->packages[i].manager;
        if (!sbx_package_manager_name(manager))
            return sbx_error_set(err, SBX_E_INVALID, "package manager %d is unknown",
                                 manager);
        if (done[manager])
            continue;
        done[manager] = true;
        int rc = progress ? progress(ud, sbx_package_manager_name(manager), err)
                          : SBX_OK;
        if (rc != SBX_OK)
            return rc;
        if ((rc = install_manager(h, spec, manager, cancel, err)) != SBX_OK)
            return rc;
    }
    return SBX_OK;
}
