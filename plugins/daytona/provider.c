/*
 * provider.c - the `daytona` provider's descriptor, configuration keys,
 * init/fini and error reports. init reads the configuration and
 * DAYTONA_API_KEY and prepares the API connection pool; it contacts
 * nothing. See daytona.h.
 */
#include "daytona.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_VAR "DAYTONA_API_KEY"
#define URL_VAR "DAYTONA_API_URL"
#define TARGET_VAR "DAYTONA_TARGET"
#define SNAPSHOT_VAR "DAYTONA_SNAPSHOT"
#define IMAGE_VAR "DAYTONA_IMAGE"
#define AUTO_VAR "DAYTONA_AUTO_PAUSE_MINUTES"
#define DEFAULT_API_URL "https://app.daytona.io/api"

static const struct sbx_config_key daytona_keys[] = {
    SBX_CONFIG_SECRET("api_key", "API key: only from DAYTONA_API_KEY, never the configuration (required)", KEY_VAR),
    SBX_CONFIG_KEY_ENV("api_url", SBX_CFG_STRING, "API URL (default $DAYTONA_API_URL, else https://app.daytona.io/api)", URL_VAR),
    SBX_CONFIG_KEY_ENV("target", SBX_CFG_STRING, "region of new sandboxes (default $DAYTONA_TARGET, else the organization's)", TARGET_VAR),
    SBX_CONFIG_KEY_ENV("snapshot", SBX_CFG_STRING, "snapshot of new sandboxes (default $DAYTONA_SNAPSHOT)", SNAPSHOT_VAR),
    SBX_CONFIG_KEY_ENV("image", SBX_CFG_STRING, "image of new sandboxes instead of a snapshot (default $DAYTONA_IMAGE)", IMAGE_VAR),
    SBX_CONFIG_KEY_ENV("auto_stop_minutes", SBX_CFG_INT, "minutes of inactivity before the sandbox stops, which is what pause does (default $DAYTONA_AUTO_PAUSE_MINUTES, else 15; 0: never)", AUTO_VAR),
    SBX_CONFIG_KEY("network", SBX_CFG_BOOL, "allow network access from the sandbox (default false: networkBlockAll)"),
    SBX_CONFIG_KEY("user", SBX_CFG_STRING, "OS user of new sandboxes (default: the snapshot's)"),
    SBX_CONFIG_KEY("workspace", SBX_CFG_STRING, "workspace directory (default /home/daytona/workspace)"),
    SBX_CONFIG_KEY("request_timeout_ms", SBX_CFG_INT, "timeout of one API or toolbox request (default 60000)"),
    SBX_CONFIG_KEY("connect_timeout_ms", SBX_CFG_INT, "TCP/TLS connect timeout (default 10000)"),
    SBX_CONFIG_KEY("start_timeout_ms", SBX_CFG_INT, "how long a sandbox may take to reach started, or stopped at pause (default 180000)"),
    SBX_CONFIG_KEY("retries", SBX_CFG_INT, "retries of idempotent calls on transient failures (default 4)"),
    SBX_CONFIG_KEY("proc_buffer_bytes", SBX_CFG_INT, "replay buffer per stream of a process, in the sandbox (default 1048576)"),
    SBX_CONFIG_KEY("state_dir", SBX_CFG_STRING, "absolute host directory of memory attachments and baselines (default $XDG_STATE_HOME/sbx/daytona)"),
    SBX_CONFIG_KEYS_END};

const struct sbxp_reporter daytona_reporter = {
    .who = DT, .service = "service", .key = KEY_VAR, .key_noun = "API key"};

static int dup_opt(const struct sbx_host *host, sbx_call *call, const char *v, char **out)
{
    *out = v && *v ? strdup(v) : NULL;
    if (v && *v && !*out)
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    return SBX_OK;
}

/* Printable ASCII without spaces: a key that can travel in a header. */
static int header_safe(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

static void conf_free(struct daytona_conf *c)
{
    if (c->api_key) {
        volatile char *p = c->api_key; /* a credential: wipe before free */
        while (*p)
            *p++ = 0;
    }
    free(c->api_key);
    free(c->api_url);
    free(c->target);
    free(c->snapshot);
    free(c->image);
    free(c->user);
    free(c->workspace);
    free(c->state_dir);
    memset(c, 0, sizeof *c);
}

static int conf_load(const struct sbx_host *host, sbx_call *call, struct daytona_conf *c)
{
    memset(c, 0, sizeof *c);
    const char *key = getenv(KEY_VAR);
    if (!key || !*key)
        return host->set_error(host, call, SBX_E_CONFIG, DT ": no API key: set " KEY_VAR);
    if (!header_safe(key))
        return host->set_error(host, call, SBX_E_CONFIG,
                               DT ": the API key in " KEY_VAR " has spaces or control characters");
    int rc;
    const char *url;
    if ((rc = sbxp_config_url_env(host, call, DT, "api_url", URL_VAR, &url)))
        return rc;
    if (!url)
        url = DEFAULT_API_URL;
    /* Each key by the one rule (configuration, then its variable), so
     * that `sbx check` shows what is used; a snapshot and an image from
     * any two sources are refused together. */
    char sn[64], in[64];
    const char *snap_from, *img_from;
    const char *snap = sbxp_config_env(host, DT, "snapshot", SNAPSHOT_VAR, sn, sizeof sn,
                                       &snap_from);
    const char *img = sbxp_config_env(host, DT, "image", IMAGE_VAR, in, sizeof in, &img_from);
    if (snap && *snap && img && *img)
        return host->set_error(host, call, SBX_E_CONFIG,
                               DT ": set snapshot or image, not both (%s and %s)", snap_from,
                               img_from);
    if ((rc = dup_opt(host, call, key, &c->api_key)) || (rc = dup_opt(host, call, url, &c->api_url)) ||
        (rc = dup_opt(host, call, sbxp_config_env(host, DT, "target", TARGET_VAR, NULL, 0, NULL),
                      &c->target)) ||
        (rc = dup_opt(host, call, snap, &c->snapshot)) ||
        (rc = dup_opt(host, call, img, &c->image)) ||
        (rc = dup_opt(host, call, sbxp_config_get(host, "user"), &c->user)))
        return rc;
    if (c->image && strpbrk(c->image, "\n\r \t"))
        return host->set_error(host, call, SBX_E_CONFIG, "%s: an image reference has no spaces",
                               img_from);
    if (c->target && strpbrk(c->target, "\n\r \t/?#&"))
        return host->set_error(host, call, SBX_E_CONFIG, "%s: want a region name such as us",
                               sbxp_config_get(host, "target") ? "providers." DT ".target"
                                                                : TARGET_VAR);
    const char *ws = sbxp_config_get(host, "workspace");
    if ((rc = sbxp_rmem_state_dir(host, call, DT, sbxp_config_get(host, "state_dir"),
                                  &c->state_dir)) ||
        (rc = dup_opt(host, call, ws ? ws : "/home/daytona/workspace", &c->workspace)))
        return rc;
    size_t wl = strlen(c->workspace);
    while (wl > 1 && c->workspace[wl - 1] == '/')
        c->workspace[--wl] = '\0';
    if (c->workspace[0] != '/' || wl < 2 || strstr(c->workspace, "/..") ||
        strpbrk(c->workspace, "\n'"))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers." DT ".workspace: want an absolute path below /");
    if ((rc = sbxp_config_int_env(host, call, DT, "auto_stop_minutes", AUTO_VAR, 15, 0,
                                  60 * 24 * 30, &c->auto_stop_min)) ||
        (rc = sbxp_http_config(host, call, DT, &c->request_timeout_ms, &c->connect_timeout_ms,
                               &c->retry)) ||
        (rc = sbxp_config_int(host, call, DT, "start_timeout_ms", 180000, 100, 3600000,
                              &c->start_timeout_ms)) ||
        (rc = sbxp_config_int(host, call, DT, "proc_buffer_bytes", (int64_t)SBX_PROC_BUFFER_DEFAULT,
                              4096, INT64_C(1) << 30, &c->proc_buffer)))
        return rc;
    const char *net = sbxp_config_get(host, "network");
    c->network = net && !strcmp(net, "true");
    return SBX_OK;
}

static void state_free(struct daytona_state *st)
{
    if (!st)
        return;
    sbxp_http_free(st->api);
    sbxp_http_free(st->toolbox);
    free(st->toolbox_url);
    conf_free(&st->cfg);
    volatile char *p = st->auth;
    while (*p)
        *p++ = 0;
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static int daytona_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    *state = NULL;
    struct daytona_state *st = calloc(1, sizeof *st);
    if (!st)
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    st->host = host;
    pthread_mutex_init(&st->lock, NULL);
    int rc = conf_load(host, call, &st->cfg);
    if (rc == SBX_OK &&
        snprintf(st->auth, sizeof st->auth, "Authorization: Bearer %s", st->cfg.api_key) >=
            (int)sizeof st->auth)
        rc = host->set_error(host, call, SBX_E_CONFIG, DT ": the key in " KEY_VAR " is too long");
    if (rc == SBX_OK) {
        sbxp_http_error err;
        if (sbxp_http_new(st->cfg.api_url, &st->api, &err) != SBX_OK)
            rc = host->set_error(host, call, SBX_E_CONFIG, DT ": providers." DT ".api_url: %s",
                                 err.message);
    }
    if (rc != SBX_OK) {
        state_free(st);
        return rc;
    }
    st->ctl = (struct sbxp_api){st->api, host, st->auth, st->cfg.request_timeout_ms,
                                st->cfg.connect_timeout_ms, &st->cfg.retry};
    *state = st;
    return SBX_OK;
}

static void daytona_fini(void *state)
{
    state_free(state);
}

static const struct sbx_provider_ops daytona_ops = {
    .init = daytona_init,
    .fini = daytona_fini,
    .create = daytona_create,
    .attach = daytona_attach,
    .exec = daytona_exec,
    .read_file = daytona_read_file,
    .write_file = daytona_write_file,
    .root = daytona_root,
    .release = daytona_release,
    .destroy = daytona_destroy,
    .export_outputs = daytona_export_outputs,
    .skill_install = daytona_skill_install,
    .memory_load = daytona_memory_load,
    .memory_diff = daytona_memory_diff,
    .memory_accept = daytona_memory_accept,
    .proc_start = daytona_proc_start,
    .proc_write = daytona_proc_write,
    .proc_read = daytona_proc_read,
    .proc_signal = daytona_proc_signal,
    .proc_list = daytona_proc_list,
    .proc_resize = daytona_proc_resize,
    .file_list = daytona_file_list,
    .file_stat = daytona_file_stat,
    .file_mkdir = daytona_file_mkdir,
    .file_remove = daytona_file_remove,
    .file_rename = daytona_file_rename,
    .port_resolve = daytona_port_resolve,
    .pause = daytona_pause,
    .resume = daytona_resume,
    .health = daytona_health,
};

SBX_PROVIDER_DEFINE("daytona", "0.2.0", "Daytona sandboxes over the Daytona API and toolbox",
                    SBX_ISOLATION_CONTAINER,
                    SBX_CAP_OUTPUT_EXPORT | SBX_CAP_SKILLS | SBX_CAP_MEMORY | SBX_CAP_PROCESSES |
                        SBX_CAP_PTY | SBX_CAP_FILE_OPS | SBX_CAP_PORTS | SBX_CAP_PAUSE |
                        SBX_CAP_POOL,
                    &daytona_ops, daytona_keys)
