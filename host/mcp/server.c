/*
 * server.c - the serve loop of `sbx mcp` (docs/MCP.md): read lines from
 * the client, classify them (jsonrpc.c), answer the lifecycle requests
 * (initialize, ping, tools/list) on this thread and hand tools/call to a
 * thread of its own (calls.c), so a long call never holds the reader.
 *
 * The line reader is bounded: a line longer than SBXM_MAX_LINE is never
 * held whole; what came of it is dropped as it arrives and the client gets
 * -32600 once its newline is seen.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK ((size_t)64 << 10)

/* Newest first: the one answered to a client that asks for another. */
static const char *const protocol_versions[] = {
    "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", NULL,
};

/* ---- process cursors --------------------------------------------------- */

/* Cursors kept at most: past it the oldest are forgotten (a later
 * write_stdin of a forgotten process reads its replay buffer from 0). */
#define PROCS_MAX 4096

struct sbxm_proc_entry {
    struct sbxm_proc_entry *next;
    char *sandbox;
    char id[SBX_PROC_ID_MAX];
    struct sbxm_proc_state st;
};

static struct sbxm_proc_entry **proc_find(struct sbxm_server *srv, const char *sandbox,
                                          const char *id)
{
    struct sbxm_proc_entry **p = &srv->procs;
    for (; *p; p = &(*p)->next)
        if (!strcmp((*p)->sandbox, sandbox) && !strcmp((*p)->id, id))
            return p;
    return p;
}

int sbxm_proc_put(struct sbxm_server *srv, const char *sandbox, const char *id,
                  const struct sbxm_proc_state *st)
{
    if (strlen(id) >= SBX_PROC_ID_MAX)
        return SBX_E_INVALID;
    pthread_mutex_lock(&srv->procs_mu);
    struct sbxm_proc_entry **p = proc_find(srv, sandbox, id);
    if (*p) {
        (*p)->st = *st;
        pthread_mutex_unlock(&srv->procs_mu);
        return SBX_OK;
    }
    struct sbxm_proc_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->sandbox = strdup(sandbox))) {
        free(e);
        pthread_mutex_unlock(&srv->procs_mu);
        return SBX_E_NOMEM;
    }
    memcpy(e->id, id, strlen(id) + 1);
    e->st = *st;
    e->next = srv->procs;
    srv->procs = e;
    if (++srv->nprocs > PROCS_MAX) {
        struct sbxm_proc_entry **q = &srv->procs;
        while ((*q)->next)
            q = &(*q)->next;
        free((*q)->sandbox);
        free(*q);
        *q = NULL;
        srv->nprocs--;
    }
    pthread_mutex_unlock(&srv->procs_mu);
    return SBX_OK;
}

bool sbxm_proc_get(struct sbxm_server *srv, const char *sandbox, const char *id,
                   struct sbxm_proc_state *st)
{
    pthread_mutex_lock(&srv->procs_mu);
    struct sbxm_proc_entry **p = proc_find(srv, sandbox, id);
    bool found = *p != NULL;
    if (found)
        *st = (*p)->st;
    pthread_mutex_unlock(&srv->procs_mu);
    return found;
}

void sbxm_proc_forget(struct sbxm_server *srv, const char *sandbox, const char *id)
{
    pthread_mutex_lock(&srv->procs_mu);
    for (struct sbxm_proc_entry **p = &srv->procs; *p;) {
        struct sbxm_proc_entry *e = *p;
        if (!strcmp(e->sandbox, sandbox) && (!id || !strcmp(e->id, id))) {
            *p = e->next;
            free(e->sandbox);
            free(e);
            srv->nprocs--;
        } else {
            p = &e->next;
        }
    }
    pthread_mutex_unlock(&srv->procs_mu);
}

/* ---- accessors ---------------------------------------------------------- */

const struct sbxm_options *sbxm_options(const struct sbxm_server *srv)
{
    return &srv->opts;
}

sbx_ctx *sbxm_ctx(const struct sbxm_server *srv)
{
    return srv->ctx;
}

sbx_sessions *sbxm_sessions(const struct sbxm_server *srv)
{
    return srv->m;
}

const char *sbxm_provider_name(const struct sbxm_server *srv)
{
    return srv->provider;
}

/* ---- output -------------------------------------------------------------- */

void sbxm_send(struct sbxm_server *srv, json_object *msg)
{
    if (!msg)
        return;
    size_t len = 0;
    const char *text = json_object_to_json_string_length(
        msg, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    pthread_mutex_lock(&srv->out_mu);
    if (text && !srv->out_broken) {
        /* the line and its newline in as few writes as the pipe takes */
        char *line = malloc(len + 1);
        if (line) {
            memcpy(line, text, len);
            line[len] = '\n';
            size_t off = 0;
            while (off < len + 1) {
                ssize_t n = write(srv->out_fd, line + off, len + 1 - off);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    srv->out_broken = true;
                    break;
                }
                off += (size_t)n;
            }
            free(line);
        }
    }
    pthread_mutex_unlock(&srv->out_mu);
    json_object_put(msg);
}

/* ---- the tools ------------------------------------------------------------ */

static const struct sbxm_tool *const *tables(void)
{
    static const struct sbxm_tool *const t[] = {
        sbxm_tools_sandbox, sbxm_tools_exec, sbxm_tools_files, sbxm_tools_search,
        sbxm_tools_state, sbxm_tools_sdk, NULL,
    };
    return t;
}

/* The enabled tools: each table's entries of the groups --tools names; an
 * entry whose name is already enabled replaces it (a group's variant of a
 * tool, e.g. create_sandbox with a manifest for sdk). Every inputSchema
 * must be a closed object schema: what a call may pass is exactly what the
 * table declares. */
static int load_tools(struct sbxm_server *srv)
{
    size_t cap = 0;
    for (const struct sbxm_tool *const *t = tables(); *t; t++)
        for (const struct sbxm_tool *e = *t; e->name; e++)
            cap++;
    srv->tools = calloc(cap + 1, sizeof *srv->tools);
    srv->schemas = calloc(cap + 1, sizeof *srv->schemas);
    if (!srv->tools || !srv->schemas)
        return SBX_E_NOMEM;
    for (const struct sbxm_tool *const *t = tables(); *t; t++) {
        for (const struct sbxm_tool *e = *t; e->name; e++) {
            if (!(e->group & srv->opts.tools))
                continue;
            json_object *schema = json_tokener_parse(e->input_schema ? e->input_schema : "");
            json_object *ap = NULL, *type = NULL;
            if (!json_object_is_type(schema, json_type_object) ||
                !json_object_object_get_ex(schema, "type", &type) ||
                strcmp(json_object_get_string(type), "object") ||
                !json_object_object_get_ex(schema, "additionalProperties", &ap) ||
                !json_object_is_type(ap, json_type_boolean) || json_object_get_boolean(ap)) {
                fprintf(stderr, "sbx mcp: tool %s: inputSchema is not a closed object "
                                "schema (type object, additionalProperties false)\n",
                        e->name);
                json_object_put(schema);
                return SBX_E_INTERNAL;
            }
            if (e->output_schema) {
                json_object *os = json_tokener_parse(e->output_schema);
                bool ok = json_object_is_type(os, json_type_object);
                json_object_put(os);
                if (!ok) {
                    fprintf(stderr, "sbx mcp: tool %s: outputSchema is not an object\n",
                            e->name);
                    json_object_put(schema);
                    return SBX_E_INTERNAL;
                }
            }
            size_t i = 0;
            while (i < srv->ntools && strcmp(srv->tools[i]->name, e->name))
                i++;
            if (i == srv->ntools)
                srv->ntools++;
            else
                json_object_put(srv->schemas[i]);
            srv->tools[i] = e;
            srv->schemas[i] = schema;
        }
    }
    srv->tools_list = json_object_new_array();
    for (size_t i = 0; i < srv->ntools; i++) {
        const struct sbxm_tool *e = srv->tools[i];
        json_object *o = json_object_new_object(), *ann = json_object_new_object();
        json_object_object_add(o, "name", json_object_new_string(e->name));
        if (e->title)
            json_object_object_add(o, "title", json_object_new_string(e->title));
        json_object_object_add(o, "description",
                               json_object_new_string(e->description ? e->description : ""));
        json_object_object_add(o, "inputSchema", json_object_get(srv->schemas[i]));
        if (e->output_schema)
            json_object_object_add(o, "outputSchema", json_tokener_parse(e->output_schema));
        if (e->title)
            json_object_object_add(ann, "title", json_object_new_string(e->title));
        json_object_object_add(ann, "readOnlyHint", json_object_new_boolean(e->read_only));
        json_object_object_add(ann, "openWorldHint", json_object_new_boolean(false));
        json_object_object_add(o, "annotations", ann);
        json_object_array_add(srv->tools_list, o);
    }
    return SBX_OK;
}

/* ---- lifecycle ------------------------------------------------------------- */

static void on_initialize(struct sbxm_server *srv, json_object *id, json_object *params)
{
    json_object *v = NULL;
    if (!params || !json_object_object_get_ex(params, "protocolVersion", &v) ||
        !json_object_is_type(v, json_type_string)) {
        sbxm_send(srv, sbxm_error_response(id, SBXM_INVALID_PARAMS,
                                           "initialize: params.protocolVersion (a string) "
                                           "is required"));
        return;
    }
    if (srv->initialized) {
        sbxm_send(srv, sbxm_error_response(id, SBXM_INVALID_REQUEST,
                                           "initialize: the session is already initialized"));
        return;
    }
    const char *asked = json_object_get_string(v), *chosen = protocol_versions[0];
    for (size_t i = 0; protocol_versions[i]; i++)
        if (!strcmp(asked, protocol_versions[i]))
            chosen = protocol_versions[i];
    snprintf(srv->protocol, sizeof srv->protocol, "%s", chosen);
    srv->initialized = true;

    json_object *r = json_object_new_object(), *caps = json_object_new_object(),
                *tools = json_object_new_object(), *info = json_object_new_object();
    json_object_object_add(r, "protocolVersion", json_object_new_string(chosen));
    json_object_object_add(tools, "listChanged", json_object_new_boolean(false));
    json_object_object_add(caps, "tools", tools);
    json_object_object_add(r, "capabilities", caps);
    json_object_object_add(info, "name", json_object_new_string("sbx"));
    json_object_object_add(info, "title", json_object_new_string("sbx sandboxes"));
    json_object_object_add(info, "version", json_object_new_string(SBX_VERSION));
    json_object_object_add(r, "serverInfo", info);
    json_object_object_add(r, "instructions",
                           json_object_new_string(
                               "Sandboxes on the operator's configured provider. Call "
                               "create_sandbox (or connect_sandbox) first, then pass its "
                               "`sandbox` to every other tool."));
    sbxm_send(srv, sbxm_result_response(id, r));
}

static void on_request(struct sbxm_server *srv, struct sbxm_msg *m)
{
    if (!strcmp(m->method, "ping")) {
        sbxm_send(srv, sbxm_result_response(m->id, json_object_new_object()));
        return;
    }
    if (!strcmp(m->method, "initialize")) {
        on_initialize(srv, m->id, m->params);
        return;
    }
    if (!srv->initialized) {
        sbxm_send(srv, sbxm_error_response(m->id, SBXM_INVALID_REQUEST,
                                           "%.100s: the session is not initialized (send "
                                           "initialize first)",
                                           m->method));
        return;
    }
    if (!strcmp(m->method, "tools/list")) {
        json_object *r = json_object_new_object();
        json_object_object_add(r, "tools", json_object_get(srv->tools_list));
        sbxm_send(srv, sbxm_result_response(m->id, r));
        return;
    }
    if (!strcmp(m->method, "tools/call")) {
        sbxm_call_start(srv, m->id, m->params);
        return;
    }
    sbxm_send(srv, sbxm_error_response(m->id, SBXM_METHOD_NOT_FOUND,
                                       "unknown method \"%.100s\"", m->method));
}

static void on_notification(struct sbxm_server *srv, struct sbxm_msg *m)
{
    json_object *id;
    if (!strcmp(m->method, "notifications/cancelled") && m->params &&
        json_object_object_get_ex(m->params, "requestId", &id))
        sbxm_call_cancel(srv, id);
    /* notifications/initialized and anything else: nothing to do */
}

static void on_line(struct sbxm_server *srv, const char *line, size_t len)
{
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    if (len == 0)
        return;
    struct sbxm_msg m;
    sbxm_msg_parse(line, len, &m);
    switch (m.kind) {
    case SBXM_MSG_INVALID:
        sbxm_send(srv, m.error);
        m.error = NULL;
        break;
    case SBXM_MSG_REQUEST:
        on_request(srv, &m);
        break;
    case SBXM_MSG_NOTIFICATION:
        on_notification(srv, &m);
        break;
    case SBXM_MSG_RESPONSE:
        break;
    }
    sbxm_msg_free(&m);
}

/* Read lines until EOF. Returns 0 at EOF, nonzero after a read error. */
static int read_loop(struct sbxm_server *srv, int in_fd)
{
    size_t cap = READ_CHUNK * 2, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return -1;
    bool skipping = false; /* inside a line over the limit */
    int rc = 0;
    for (;;) {
        if (cap - len < READ_CHUNK) {
            size_t ncap = cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                rc = -1;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(in_fd, buf + len, READ_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "sbx mcp: reading the client: %s\n", strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        size_t start = 0, end = len + (size_t)n, scan = len;
        len = end;
        for (;;) {
            char *nl = memchr(buf + scan, '\n', end - scan);
            if (!nl)
                break;
            size_t at = (size_t)(nl - buf);
            if (skipping) {
                skipping = false;
                sbxm_send(srv, sbxm_error_response(NULL, SBXM_INVALID_REQUEST,
                                                   "invalid request: message longer "
                                                   "than 16 MiB"));
            } else {
                on_line(srv, buf + start, at - start);
            }
            start = scan = at + 1;
            sbxm_calls_reap(srv, false);
        }
        /* keep the partial line; drop it when it is already too long */
        if (start) {
            memmove(buf, buf + start, len - start);
            len -= start;
        }
        if (len > SBXM_MAX_LINE) {
            skipping = true;
            len = 0;
        } else if (skipping) {
            len = 0;
        }
        /* shrink back after a large line */
        if (cap > READ_CHUNK * 4 && len < READ_CHUNK) {
            char *nb = realloc(buf, READ_CHUNK * 2);
            if (nb) {
                buf = nb;
                cap = READ_CHUNK * 2;
            }
        }
        if (srv->out_broken) {
            fputs("sbx mcp: writing to the client failed: ending\n", stderr);
            rc = -1;
            break;
        }
    }
    /* a last line without its newline is still a message */
    if (rc == 0 && len && !skipping)
        on_line(srv, buf, len);
    free(buf);
    return rc;
}

/* <state dir>/mcp-snapshots: $XDG_STATE_HOME/sbx, else ~/.local/state/sbx
 * (where the default store lives). */
static char *default_snapshot_dir(void)
{
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char path[4096];
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(path, sizeof path, "%s/sbx/mcp-snapshots", xdg);
    else if (home && home[0] == '/')
        n = snprintf(path, sizeof path, "%s/.local/state/sbx/mcp-snapshots", home);
    else
        return NULL;
    return n > 0 && (size_t)n < sizeof path ? strdup(path) : NULL;
}

int sbxm_serve(const struct sbxm_options *opts, int in_fd, int out_fd)
{
    struct sbxm_server *srv = calloc(1, sizeof *srv);
    if (!srv) {
        fputs("sbx mcp: out of memory\n", stderr);
        return 1;
    }
    srv->opts = *opts;
    if (!srv->opts.tools)
        srv->opts.tools = SBXM_TOOLS_AGENT;
    if (!srv->opts.max_read_bytes)
        srv->opts.max_read_bytes = (size_t)1 << 20;
    if (!srv->opts.max_write_bytes)
        srv->opts.max_write_bytes = (size_t)16 << 20;
    if (!srv->opts.max_output_bytes)
        srv->opts.max_output_bytes = (size_t)1 << 20;
    if (!srv->opts.max_calls)
        srv->opts.max_calls = 16;
    if (!srv->opts.snapshot_dir) {
        srv->snapshot_dir = default_snapshot_dir();
        srv->opts.snapshot_dir = srv->snapshot_dir;
    }
    srv->out_fd = out_fd;
    pthread_mutex_init(&srv->out_mu, NULL);
    pthread_mutex_init(&srv->calls_mu, NULL);
    pthread_mutex_init(&srv->procs_mu, NULL);
    int status = 1;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = load_tools(srv);
    if (rc != SBX_OK)
        goto out;
    struct sbx_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.config_path = opts->config_path;
    so.provider = opts->provider;
    rc = sbx_open(&so, &srv->ctx, &err);
    if (rc == SBX_OK) {
        struct sbx_sessions_options mo;
        memset(&mo, 0, sizeof mo);
        mo.size = sizeof mo;
        rc = sbx_sessions_open(srv->ctx, &mo, &srv->m, &err);
    }
    if (rc == SBX_OK)
        rc = sbxm_handles_new(srv->m, &srv->handles);
    if (rc != SBX_OK) {
        fprintf(stderr, "sbx: %s\n", err.message[0] ? err.message : sbx_strerror(rc));
        goto out;
    }
    srv->provider = opts->provider ? opts->provider : sbx_default_provider(srv->ctx);
    status = read_loop(srv, in_fd) == 0 ? 0 : 1;
    sbxm_calls_reap(srv, true);
out:
    sbxm_handles_free(srv->handles);
    sbx_sessions_close(srv->m);
    sbx_close(srv->ctx);
    for (struct sbxm_proc_entry *e = srv->procs, *n; e; e = n) {
        n = e->next;
        free(e->sandbox);
        free(e);
    }
    for (size_t i = 0; i < srv->ntools; i++)
        json_object_put(srv->schemas[i]);
    free(srv->schemas);
    free(srv->tools);
    json_object_put(srv->tools_list);
    pthread_mutex_destroy(&srv->out_mu);
    pthread_mutex_destroy(&srv->calls_mu);
    pthread_mutex_destroy(&srv->procs_mu);
    free(srv->snapshot_dir);
    free(srv);
    return status;
}
