/*
 * calls.c - tools/call: checked on the reader thread (tool known, the
 * arguments against its inputSchema, the id not already running, room
 * under --max-calls), then run on a thread of its own with its own
 * cancellation token. notifications/cancelled and the end of input fire
 * the token; a cancelled call sends no response (the MCP rule). The
 * handles a call borrowed are given back when it ends.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sbxm_call_slot {
    struct sbxm_call call; /* first: a struct sbxm_call * is a slot */
    struct sbxm_call_slot *next;
    struct sbxm_server *srv;
    pthread_t thread;
    json_object *id;
    json_object *args;
    const struct sbxm_tool *tool;
    bool cancelled;  /* no response will be sent */
    bool responding; /* the response is on its way: too late to cancel */
    bool done;
    struct sbxm_handle_ref **refs;
    size_t nrefs, caprefs;
};

static struct sbxm_call_slot *slot_of(struct sbxm_call *c)
{
    return (struct sbxm_call_slot *)c;
}

/* ---- helpers for the tools -------------------------------------------------- */

const char *sbxm_arg_str(const struct sbxm_call *c, const char *key)
{
    json_object *v;
    if (!c->args || !json_object_object_get_ex(c->args, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

int64_t sbxm_arg_int(const struct sbxm_call *c, const char *key, int64_t dflt)
{
    json_object *v;
    if (!c->args || !json_object_object_get_ex(c->args, key, &v) ||
        !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
        return dflt;
    return json_object_get_int64(v);
}

bool sbxm_arg_bool(const struct sbxm_call *c, const char *key, bool dflt)
{
    json_object *v;
    if (!c->args || !json_object_object_get_ex(c->args, key, &v) ||
        !json_object_is_type(v, json_type_boolean))
        return dflt;
    return json_object_get_boolean(v);
}

bool sbxm_cancelled(const struct sbxm_call *c)
{
    return sbx_cancel_fired(c->cancel);
}

int sbxm_handle_as(struct sbxm_call *c, const char *name, const char *user,
                   sbx_handle **out, sbx_error *err)
{
    struct sbxm_call_slot *s = slot_of(c);
    if (!name || !name[0])
        return sbx_error_set(err, SBX_E_INVALID, "missing the sandbox (a session key)");
    if (user && !user[0])
        user = NULL;
    if (s->nrefs == s->caprefs) {
        size_t n = s->caprefs ? s->caprefs * 2 : 4;
        struct sbxm_handle_ref **r = realloc(s->refs, n * sizeof *r);
        if (!r)
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        s->refs = r;
        s->caprefs = n;
    }
    struct sbxm_handle_ref *ref;
    int rc = sbxm_handles_get(s->srv->handles, name, user, c->cancel, out, &ref, err);
    if (rc == SBX_OK) {
        s->refs[s->nrefs++] = ref;
    } else if (rc == SBX_E_NOT_FOUND) {
        /* the client named it: say which, and what to do */
        char was[SBX_ERROR_MAX];
        snprintf(was, sizeof was, "%s", err->message);
        sbx_error_set(err, rc, "sandbox \"%.200s\": %s (create_sandbox or connect_sandbox "
                               "names an existing one)",
                      name, was);
    }
    return rc;
}

void sbxm_call_keep(struct sbxm_call *c, struct sbxm_handle_ref *ref)
{
    struct sbxm_call_slot *s = slot_of(c);
    if (!ref)
        return;
    if (s->nrefs == s->caprefs) {
        size_t n = s->caprefs ? s->caprefs * 2 : 4;
        struct sbxm_handle_ref **r = realloc(s->refs, n * sizeof *r);
        if (!r) {
            sbxm_handles_put(s->srv->handles, ref);
            return;
        }
        s->refs = r;
        s->caprefs = n;
    }
    s->refs[s->nrefs++] = ref;
}

int sbxm_handle(struct sbxm_call *c, const char *name, sbx_handle **out, sbx_error *err)
{
    return sbxm_handle_as(c, name, NULL, out, err);
}

void sbxm_progress(struct sbxm_call *c, double progress, double total, const char *message)
{
    struct sbxm_call_slot *s = slot_of(c);
    if (!c->progress_token)
        return;
    struct sbxm_server *srv = s->srv;
    pthread_mutex_lock(&srv->calls_mu);
    bool quiet = s->cancelled || srv->closing;
    pthread_mutex_unlock(&srv->calls_mu);
    if (quiet)
        return;
    json_object *n = json_object_new_object(), *p = json_object_new_object();
    json_object_object_add(n, "jsonrpc", json_object_new_string("2.0"));
    json_object_object_add(n, "method", json_object_new_string("notifications/progress"));
    json_object_object_add(p, "progressToken", json_object_get(c->progress_token));
    json_object_object_add(p, "progress", json_object_new_double(progress));
    if (total > 0)
        json_object_object_add(p, "total", json_object_new_double(total));
    if (message)
        json_object_object_add(p, "message", json_object_new_string(message));
    json_object_object_add(n, "params", p);
    sbxm_send(srv, n);
}

/* ---- results ------------------------------------------------------------------ */

static json_object *text_content(const char *text)
{
    json_object *arr = json_object_new_array(), *t = json_object_new_object();
    json_object_object_add(t, "type", json_object_new_string("text"));
    json_object_object_add(t, "text", json_object_new_string(text));
    json_object_array_add(arr, t);
    return arr;
}

/* {content: [text], isError: true} */
static json_object *tool_error(const char *tool, const char *msg)
{
    char text[SBX_ERROR_MAX + 128];
    snprintf(text, sizeof text, "sbx: %s: %s", tool, msg);
    json_object *r = json_object_new_object();
    json_object_object_add(r, "content", text_content(text));
    json_object_object_add(r, "isError", json_object_new_boolean(true));
    return r;
}

static json_object *tool_result(json_object *structured)
{
    json_object *r = json_object_new_object();
    const char *text = json_object_to_json_string_ext(
        structured, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    json_object_object_add(r, "content", text_content(text ? text : "{}"));
    json_object_object_add(r, "structuredContent", structured);
    json_object_object_add(r, "isError", json_object_new_boolean(false));
    return r;
}

static void *call_main(void *arg)
{
    struct sbxm_call_slot *s = arg;
    struct sbxm_server *srv = s->srv;
    json_object *structured = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = s->tool->run(&s->call, &structured, &err);
    json_object *result;
    if (rc == SBX_OK) {
        if (!json_object_is_type(structured, json_type_object)) {
            json_object_put(structured);
            structured = json_object_new_object();
        }
        result = tool_result(structured);
    } else {
        json_object_put(structured);
        result = tool_error(s->tool->name,
                            err.message[0] ? err.message : sbx_strerror(rc));
    }
    for (size_t i = 0; i < s->nrefs; i++)
        sbxm_handles_put(srv->handles, s->refs[i]);
    s->nrefs = 0;
    /* Out of the count before the response leaves: a client that sends
     * its next call as soon as it reads this one must find room for it
     * (and may reuse the id). The reader joins the thread later. */
    pthread_mutex_lock(&srv->calls_mu);
    bool send = !s->cancelled && !srv->closing;
    s->responding = true;
    s->done = true;
    srv->running--;
    pthread_mutex_unlock(&srv->calls_mu);
    if (send)
        sbxm_send(srv, sbxm_result_response(s->id, result));
    else
        json_object_put(result);
    return NULL;
}

static void slot_free(struct sbxm_call_slot *s)
{
    sbx_cancel_free(s->call.cancel);
    json_object_put(s->call.progress_token);
    json_object_put(s->args);
    json_object_put(s->id);
    free(s->refs);
    free(s);
}

/* ---- the reader's side ------------------------------------------------------------ */

static const struct sbxm_tool *find_tool(struct sbxm_server *srv, const char *name,
                                         json_object **schema)
{
    for (size_t i = 0; i < srv->ntools; i++)
        if (!strcmp(srv->tools[i]->name, name)) {
            *schema = srv->schemas[i];
            return srv->tools[i];
        }
    return NULL;
}

void sbxm_call_start(struct sbxm_server *srv, json_object *id, json_object *params)
{
    json_object *v = NULL;
    if (!params || !json_object_object_get_ex(params, "name", &v) ||
        !json_object_is_type(v, json_type_string)) {
        sbxm_send(srv, sbxm_error_response(id, SBXM_INVALID_PARAMS,
                                           "tools/call: params.name (a string) is required"));
        return;
    }
    const char *name = json_object_get_string(v);
    json_object *schema = NULL;
    const struct sbxm_tool *tool = find_tool(srv, name, &schema);
    if (!tool || strlen(name) != (size_t)json_object_get_string_len(v)) {
        sbxm_send(srv, sbxm_error_response(id, SBXM_INVALID_PARAMS,
                                           "tools/call: unknown tool \"%.100s\"", name));
        return;
    }
    json_object *args = NULL;
    if (json_object_object_get_ex(params, "arguments", &args) && args &&
        !json_object_is_type(args, json_type_object)) {
        sbxm_send(srv, sbxm_error_response(id, SBXM_INVALID_PARAMS,
                                           "tools/call %s: arguments must be an object",
                                           tool->name));
        return;
    }
    args = args ? json_object_get(args) : json_object_new_object();
    char why[512];
    if (!sbxm_schema_check(schema, args, "arguments", why, sizeof why)) {
        json_object_put(args);
        sbxm_send(srv, sbxm_error_response(id, SBXM_INVALID_PARAMS, "tools/call %s: %s",
                                           tool->name, why));
        return;
    }
    json_object *meta, *token = NULL;
    if (json_object_object_get_ex(params, "_meta", &meta) &&
        json_object_is_type(meta, json_type_object) &&
        json_object_object_get_ex(meta, "progressToken", &token) &&
        !json_object_is_type(token, json_type_string) &&
        !json_object_is_type(token, json_type_int))
        token = NULL;

    pthread_mutex_lock(&srv->calls_mu);
    for (struct sbxm_call_slot *s = srv->calls; s; s = s->next) {
        if (!s->done && json_object_equal(s->id, id)) {
            pthread_mutex_unlock(&srv->calls_mu);
            json_object_put(args);
            sbxm_send(srv, sbxm_error_response(id, SBXM_INVALID_REQUEST,
                                               "tools/call: request id %s is already "
                                               "running",
                                               json_object_to_json_string(id)));
            return;
        }
    }
    if (srv->running >= srv->opts.max_calls) {
        pthread_mutex_unlock(&srv->calls_mu);
        json_object_put(args);
        char msg[128];
        snprintf(msg, sizeof msg, "busy: %u tool calls are running (the server's "
                                  "--max-calls); retry when one has ended",
                 srv->opts.max_calls);
        sbxm_send(srv, sbxm_result_response(id, tool_error(tool->name, msg)));
        return;
    }
    pthread_mutex_unlock(&srv->calls_mu);

    struct sbxm_call_slot *s = calloc(1, sizeof *s);
    if (!s || sbx_cancel_new(&s->call.cancel) != SBX_OK) {
        free(s);
        json_object_put(args);
        sbxm_send(srv, sbxm_error_response(id, SBXM_INTERNAL_ERROR, "out of memory"));
        return;
    }
    s->srv = srv;
    s->call.srv = srv;
    s->call.args = args;
    s->args = args;
    s->call.progress_token = token ? json_object_get(token) : NULL;
    s->id = json_object_get(id);
    s->tool = tool;
    pthread_mutex_lock(&srv->calls_mu);
    srv->running++;
    int prc = pthread_create(&s->thread, NULL, call_main, s);
    if (prc != 0) {
        srv->running--;
        pthread_mutex_unlock(&srv->calls_mu);
        slot_free(s);
        sbxm_send(srv, sbxm_error_response(id, SBXM_INTERNAL_ERROR,
                                           "tools/call: cannot start a thread: %s",
                                           strerror(prc)));
        return;
    }
    s->next = srv->calls;
    srv->calls = s;
    pthread_mutex_unlock(&srv->calls_mu);
}

void sbxm_call_cancel(struct sbxm_server *srv, json_object *id)
{
    pthread_mutex_lock(&srv->calls_mu);
    for (struct sbxm_call_slot *s = srv->calls; s; s = s->next) {
        if (!s->done && !s->responding && json_object_equal(s->id, id)) {
            s->cancelled = true;
            sbx_cancel_fire(s->call.cancel);
        }
    }
    pthread_mutex_unlock(&srv->calls_mu);
}

void sbxm_calls_reap(struct sbxm_server *srv, bool all)
{
    pthread_mutex_lock(&srv->calls_mu);
    if (all) {
        srv->closing = true;
        for (struct sbxm_call_slot *s = srv->calls; s; s = s->next)
            sbx_cancel_fire(s->call.cancel);
    }
    struct sbxm_call_slot *gone = NULL;
    for (struct sbxm_call_slot **p = &srv->calls; *p;) {
        struct sbxm_call_slot *s = *p;
        if (all || s->done) {
            *p = s->next;
            s->next = gone;
            gone = s;
        } else {
            p = &s->next;
        }
    }
    pthread_mutex_unlock(&srv->calls_mu);
    for (struct sbxm_call_slot *s = gone, *n; s; s = n) {
        n = s->next;
        pthread_join(s->thread, NULL);
        slot_free(s);
    }
}
