/* state.c - instance setup and error reporting. See e2b_core.h. */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void e2b_conf_free(struct e2b_conf *c)
{
    if (c->api_key) {
        /* The key is a credential: do not leave it in freed memory. */
        volatile char *p = c->api_key;
        while (*p)
            *p++ = 0;
    }
    free(c->api_key);
    free(c->api_url);
    free(c->domain);
    free(c->template_id);
    free(c->envd_url);
    free(c->user);
    free(c->workspace);
    free(c->state_dir);
    memset(c, 0, sizeof *c);
}

int e2b_state_new(const struct sbx_host *host, sbx_call *call, struct e2b_conf *cfg,
                  struct e2b_state **out)
{
    *out = NULL;
    struct e2b_state *st = calloc(1, sizeof *st);
    if (!st) {
        e2b_conf_free(cfg);
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    }
    st->host = host;
    st->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);
    if (st->cfg.api_key &&
        snprintf(st->key_header, sizeof st->key_header, "X-API-Key: %s",
                 st->cfg.api_key) >= (int)sizeof st->key_header) {
        int rc = host->set_error(host, call, SBX_E_CONFIG, "%s: the key in %s is too long",
                                 st->cfg.provider, st->cfg.key_source);
        e2b_state_free(st);
        return rc;
    }
    sbxp_http_error err;
    int rc = sbxp_http_new(st->cfg.api_url, &st->api, &err);
    if (rc != SBX_OK) {
        rc = host->set_error(host, call, SBX_E_CONFIG, "%s: providers.%s.api_url: %s",
                             st->cfg.provider, st->cfg.provider, err.message);
        e2b_state_free(st);
        return rc;
    }
    if (st->cfg.route != E2B_ROUTE_HOST) {
        rc = sbxp_http_new(st->cfg.envd_url, &st->envd, &err);
        if (rc != SBX_OK) {
            rc = host->set_error(host, call, SBX_E_CONFIG, "%s: envd address %s: %s",
                                 st->cfg.provider, st->cfg.envd_url, err.message);
            e2b_state_free(st);
            return rc;
        }
    }
    st->ctl = (struct sbxp_api){st->api, host, st->key_header[0] ? st->key_header : NULL,
                                st->cfg.request_timeout_ms, st->cfg.connect_timeout_ms,
                                &st->cfg.retry};
    st->report = (struct sbxp_reporter){.who = st->cfg.provider, .service = "service",
                                        .key = st->cfg.key_source, .key_noun = "key"};
    *out = st;
    return SBX_OK;
}

void e2b_fini(void *state)
{
    e2b_state_free(state);
}

void e2b_state_free(struct e2b_state *st)
{
    if (!st)
        return;
    sbxp_http_free(st->api);
    sbxp_http_free(st->envd);
    e2b_conf_free(&st->cfg);
    volatile char *p = st->key_header;
    while (*p)
        *p++ = 0;
    free(st);
}

