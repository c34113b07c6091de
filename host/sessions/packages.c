/*
 * packages.c - installing a spec's environment packages in a fresh
 * sandbox. Everything runs through the provider's exec as argument vectors:
 * no shell ever sees a package name.
 */
#include "sessions/internal.h"
#include "api/handle_user.h"
#include "config/package_managers.h"
#include "registry/provider.h"
#include "base/cancel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t argv_len(const char **v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

/* Progress of one manager's installation: its step (check, refresh,
 * install) and, as detail, the last complete line its commands printed. */
struct step_progress {
    sbx_cancel *cancel;
    char what[64];
    uint64_t step, steps;
};

/* One output stream of a step: passed on to its capture, reported by line. */
struct line_tee {
    struct step_progress *sp;
    const struct sbx_sink *inner;
    char line[160];
    size_t len;
};

static void report_step(struct step_progress *sp, const char *detail, bool finished)
{
    sbxh_progress(sp->cancel, sp->what, "steps", sp->step, sp->steps, detail, finished);
}

/* A sink that passes output on to the capture and reports each line. */
static int tee_lines(void *ctx, const void *buf, size_t len)
{
    struct line_tee *t = ctx;
    const char *b = buf;
    for (size_t i = 0; i < len; i++) {
        if (b[i] == '\n' || b[i] == '\r') {
            if (t->len) {
                t->line[t->len] = '\0';
                report_step(t->sp, t->line, false);
            }
            t->len = 0;
        } else if (t->len < sizeof t->line - 1)
            t->line[t->len++] = b[i];
    }
    return t->inner->write(t->inner->ctx, buf, len);
}

/* Run argv; SBX_OK only when it exited 0. A failure's message names the
 * manager and quotes the end of the command's error output. */
static int run(sbx_handle *h, const char *mgr, const char *const *argv,
               const char *const *env, struct step_progress *sp, sbx_cancel *cancel,
               sbx_error *err)
{
    sbx_capture out, errs;
    sbx_capture_init(&out, 0, 1024);
    sbx_capture_init(&errs, 0, 1024);
    struct sbx_sink out_capture = sbx_capture_sink(&out);
    struct sbx_sink err_capture = sbx_capture_sink(&errs);
    struct sbx_sink out_sink = out_capture, err_sink = err_capture;
    struct line_tee out_tee = {sp, &out_capture, "", 0}, err_tee = {sp, &err_capture, "", 0};
    sp->step++;
    report_step(sp, NULL, false);
    if (cancel && cancel->progress) {
        out_sink = (struct sbx_sink)SBX_SINK_INIT(&out_tee, tee_lines);
        err_sink = (struct sbx_sink)SBX_SINK_INIT(&err_tee, tee_lines);
    }
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
    int rc = sbxh_exec_as(h, SBX_AS_DEFAULT, &args, &res, cancel, &why);
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

/* Install every package of `manager` in one command, with the command
 * lines the configuration gives (or the defaults). */
static int install_manager(sbx_handle *h, const struct sbx_config *cfg,
                           const struct sbx_session_spec *spec, int manager,
                           sbx_cancel *cancel, sbx_error *err)
{
    const char *mgr = sbx_package_manager_name(manager);
    struct sbx_package_cmds c;
    int rc = sbxh_package_cmds_get(cfg, manager, &c, err);
    if (rc != SBX_OK)
        return rc;
    const char *const *env = c.env[0] ? c.env : NULL;
    struct step_progress sp = {.cancel = cancel, .steps = c.refresh[0] ? 3 : 2};
    snprintf(sp.what, sizeof sp.what, "installing %s packages", mgr);
    rc = run(h, mgr, c.check, env, &sp, cancel, err);
    if (rc == SBX_OK && c.refresh[0])
        rc = run(h, mgr, c.refresh, env, &sp, cancel, err);
    const char **argv = NULL;
    if (rc == SBX_OK) {
        size_t prefix = argv_len(c.install);
        argv = calloc(prefix + spec->npackages + 1, sizeof *argv);
        if (!argv)
            rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    if (rc == SBX_OK) {
        size_t n = 0;
        for (size_t i = 0; c.install[i]; i++)
            argv[n++] = c.install[i];
        for (size_t i = 0; i < spec->npackages; i++)
            if (spec->packages[i].manager == manager)
                argv[n++] = spec->packages[i].name;
        argv[n] = NULL;
        rc = run(h, mgr, argv, env, &sp, cancel, err);
    }
    if (rc == SBX_OK)
        report_step(&sp, NULL, true);
    free(argv);
    sbxh_package_cmds_free(&c);
    return rc;
}

int sbxh_session_install_packages(sbx_handle *h, const struct sbx_config *cfg,
                                  const struct sbx_session_spec *spec,
                                  int (*progress)(void *ud, const char *manager,
                                                  sbx_error *err),
                                  void *ud, sbx_cancel *cancel, sbx_error *err)
{
    if (!spec || spec->npackages == 0)
        return SBX_OK;
    bool done[SBX_PKG_PIP + 1] = {false};
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
        if ((rc = install_manager(h, cfg, spec, manager, cancel, err)) != SBX_OK)
            return rc;
    }
    return SBX_OK;
}
