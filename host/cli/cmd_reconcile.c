/*
 * cmd_reconcile.c - `sbx reconcile [--watch [--interval DUR] [--metrics
 * ADDR]]`: clean up what crashed workers left behind (see
 * sbx_sessions_reconcile), once or periodically as a service until
 * SIGTERM/SIGINT, serving Prometheus metrics with --metrics (metrics.h).
 */
#include "cli.h"
#include "metrics.h"
#include "op_samples.h"

#include <getopt.h>
#include <string.h>

#define DEFAULT_INTERVAL_MS 30000

static void usage(FILE *f)
{
    fputs("Usage: sbx reconcile [OPTIONS]\n"
          "\n"
          "Finish what crashed or killed workers left behind: a provisioning\n"
          "intent whose worker is gone (a process of this machine that no\n"
          "longer exists) or whose lease expired has its sandbox destroyed and\n"
          "is dropped (the next use of the session provisions it afresh); a\n"
          "session fenced for deletion is deleted. Then the warm pools: members\n"
          "a killed refill left are destroyed, ready members are health-checked\n"
          "(a failed one is replaced), members of removed or shrunk pools are\n"
          "destroyed and each pool is filled to its size. Then idle eviction: a\n"
          "session unused for its provider's idle_destroy is deleted, one unused\n"
          "for idle_pause is paused (never one whose command is running). Prints\n"
          "one summary line per pass (and one for the pools and one for eviction\n"
          "when they did something).\n"
          "\n"
          "Options:\n"
          "  -w, --watch          run a pass every interval until SIGTERM or\n"
          "                       SIGINT (for a service)\n"
          "  -i, --interval DUR   time between passes with --watch (default 30s)\n"
          "  -l, --lease DUR      take over intents not updated for DUR even\n"
          "                       when their worker may be alive (default 5m)\n"
          "  -m, --metrics ADDR   with --watch: serve Prometheus metrics at\n"
          "                       http://ADDR/metrics; ADDR is a loopback\n"
          "                       HOST:PORT (127.0.0.1:9464, [::1]:9464); op\n"
          "                       latencies come from the spool directory\n"
          "                       $SBX_METRICS_DIR (docs/OPERATIONS.md)\n"
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: 0 when everything was reconciled (with --watch: when\n"
          "stopped by a signal), 125 when sbx failed or an item is left for a\n"
          "later pass.\n", f);
}

/* The warm pools' pass (sbx_pools_reconcile), after the sessions': its
 * own summary line when pools are configured or members are left. */
static int pools_pass(sbx_sessions *m, struct sbx_pool_report *out)
{
    struct sbx_pool_report rep;
    memset(&rep, 0, sizeof rep);
    rep.size = sizeof rep;
    sbx_error err;
    int rc = sbx_pools_reconcile(m, cli_run_cancel(), &rep, &err);
    *out = rep;
    if (rc == SBX_E_CANCELLED && cli_caught_signal())
        return rc;
    if (rep.created || rep.checked || rep.replaced || rep.removed || rep.cleaned ||
        rep.held || rep.failures)
        printf("pools: %zu members created, %zu checked, %zu replaced after a failed "
               "check, %zu removed, %zu left by killed workers cleaned, %zu pools held "
               "short by max_sandboxes; %zu failures\n",
               rep.created, rep.checked, rep.replaced, rep.removed, rep.cleaned, rep.held,
               rep.failures);
    fflush(stdout);
    if (rc != SBX_OK)
        cli_error("%s", err.message[0] ? err.message : sbx_strerror((sbx_status)rc));
    return rc;
}

static int pass_inner(sbx_sessions *m, int64_t lease_ms, struct sbx_reconcile_report *out,
                      struct sbx_pool_report *pools, bool *pools_ran,
                      struct sbx_evict_report *evict, bool *evict_ran);

/* One pass; prints its summary; with metrics, counts it and reads the
 * store's gauges. Returns the sbx_status. */
static int pass(sbx_sessions *m, int64_t lease_ms, struct cli_metrics *mx)
{
    struct sbx_reconcile_report rep;
    struct sbx_pool_report pools;
    memset(&rep, 0, sizeof rep);
    memset(&pools, 0, sizeof pools);
    struct sbx_evict_report evict;
    memset(&evict, 0, sizeof evict);
    bool pools_ran = false, evict_ran = false;
    uint64_t t0 = sbxs_op_now_ns();
    int rc = pass_inner(m, lease_ms, &rep, &pools, &pools_ran, &evict, &evict_ran);
    if (mx && !cli_caught_signal()) {
        cli_metrics_pass(mx, &rep, pools_ran ? &pools : NULL, evict_ran ? &evict : NULL,
                         rc == SBX_OK, sbxs_op_now_ns() - t0);
        cli_metrics_collect(mx, m);
    }
    return rc;
}

static int pass_inner(sbx_sessions *m, int64_t lease_ms, struct sbx_reconcile_report *out,
                      struct sbx_pool_report *pools, bool *pools_ran,
                      struct sbx_evict_report *evict, bool *evict_ran)
{
    struct sbx_reconcile_report rep;
    memset(&rep, 0, sizeof rep);
    sbx_error err;
    int rc = sbx_sessions_reconcile(m, lease_ms, cli_run_cancel(), &rep, &err);
    *out = rep;
    if (rc == SBX_E_CANCELLED && cli_caught_signal())
        return rc;
    printf("reconcile: %zu intents seen, %zu cleaned, %zu left to live workers; "
           "%zu deletions finished; %zu sessions' memory written back; %zu failures\n",
           rep.intents_seen, rep.intents_cleaned, rep.intents_skipped,
           rep.deletions_done, rep.memory_written_back, rep.failures);
    fflush(stdout);
    if (rc != SBX_OK)
        cli_error("%s", err.message[0] ? err.message : sbx_strerror((sbx_status)rc));
    if (rc == SBX_E_CANCELLED && cli_caught_signal())
        return rc;
    int prc = pools_pass(m, pools);
    *pools_ran = true;
    if (prc == SBX_E_CANCELLED && cli_caught_signal())
        return prc;
    /* then idle eviction (providers' idle_pause, idle_destroy) */
    struct sbx_evict_report ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    int erc = sbx_sessions_evict(m, cli_run_cancel(), &ev, &err);
    *evict = ev;
    *evict_ran = true;
    if (ev.seen || erc != SBX_OK) {
        printf("evict: %zu idle-limited sessions seen, %zu paused, %zu destroyed, "
               "%zu in use, %zu failures\n",
               ev.seen, ev.paused, ev.destroyed, ev.in_use, ev.failures);
        fflush(stdout);
    }
    if (erc != SBX_OK && !(erc == SBX_E_CANCELLED && cli_caught_signal()))
        cli_error("%s", err.message[0] ? err.message : sbx_strerror((sbx_status)erc));
    if (rc != SBX_OK)
        return rc;
    return prc != SBX_OK ? prc : erc;
}

struct reconcile_args {
    bool watch, interval_given;
    int64_t interval_ms, lease_ms;
    const char *metrics; /* --metrics ADDR, or NULL */
};

static int on_option(void *ud, int c, const char *arg)
{
    struct reconcile_args *a = ud;
    switch (c) {
    case 'w':
        a->watch = true;
        return CLI_EXIT_OK;
    case 'i':
        if (!cli_parse_duration_ms(arg, &a->interval_ms) || a->interval_ms == 0)
            return cli_usage_error("reconcile", CLI_EXIT_SBX,
                                   "invalid --interval '%s' (expected a positive "
                                   "duration such as 30, 1.5, 500ms, 2m)",
                                   arg);
        a->interval_given = true;
        return CLI_EXIT_OK;
    case 'l':
        if (!cli_parse_duration_ms(arg, &a->lease_ms) || a->lease_ms == 0)
            return cli_usage_error("reconcile", CLI_EXIT_SBX,
                                   "invalid --lease '%s' (expected a positive "
                                   "duration such as 30, 500ms, 5m)", arg);
        return CLI_EXIT_OK;
    case 'm':
        a->metrics = arg;
        return CLI_EXIT_OK;
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

int cmd_reconcile(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"watch", no_argument, NULL, 'w'},
        {"interval", required_argument, NULL, 'i'},
        {"lease", required_argument, NULL, 'l'},
        {"metrics", required_argument, NULL, 'm'},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct reconcile_args a = {false, false, DEFAULT_INTERVAL_MS, 0, NULL};
    const struct cli_command cmd = {"reconcile", CLI_EXIT_SBX, usage, "+:wi:l:m:c:h",
                                    longopts, on_option, &a, &globals};
    int status = cli_parse_no_operands(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    if (a.interval_given && !a.watch)
        return cli_usage_error("reconcile", CLI_EXIT_SBX,
                               "--interval needs --watch");
    if (a.metrics && !a.watch)
        return cli_usage_error("reconcile", CLI_EXIT_SBX,
                               "--metrics needs --watch (metrics are served while the "
                               "reconciler runs as a service)");
    if (a.metrics) {
        /* the address first: a bad one is a usage error before anything opens */
        struct sockaddr_storage sa;
        socklen_t salen;
        char msg[512];
        if (!cli_metrics_parse_addr(a.metrics, &sa, &salen, msg, sizeof msg))
            return cli_usage_error("reconcile", CLI_EXIT_SBX, "%s", msg);
    }
    if (cli_interrupt_setup() != SBX_OK)
        return CLI_EXIT_SBX;
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(&globals, NULL, &ctx, &m) != SBX_OK) {
        status = CLI_EXIT_SBX;
    } else if (!a.watch) {
        status = pass(m, a.lease_ms, NULL) == SBX_OK ? CLI_EXIT_OK : CLI_EXIT_SBX;
        if (cli_caught_signal())
            status = CLI_EXIT_SIGNAL + cli_caught_signal();
        cli_sessions_close(ctx, m);
    } else {
        struct cli_metrics *mx = NULL;
        struct cli_spool *spool = NULL;
        struct cli_http *http = NULL;
        status = CLI_EXIT_OK;
        if (a.metrics) {
            if (!(mx = cli_metrics_new()))
                cli_error("out of memory");
            if (!mx || !(spool = cli_spool_open()) || !(cli_metrics_set_spool(mx, spool),
                                                        http = cli_http_start(mx, a.metrics)))
                status = CLI_EXIT_SBX;
        }
        /* A failed pass is reported and retried at the next interval: a
         * service keeps running through a store or backend outage. */
        while (status == CLI_EXIT_OK) {
            pass(m, a.lease_ms, mx);
            if (cli_caught_signal() || !cli_sleep_ms(a.interval_ms))
                break;
        }
        cli_http_stop(http); /* no request runs after this */
        cli_spool_close(spool);
        cli_metrics_free(mx);
        cli_sessions_close(ctx, m);
    }
    cli_interrupt_teardown();
    return status;
}
