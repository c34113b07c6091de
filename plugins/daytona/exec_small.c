/*
 * exec_small.c - helper commands with little text output (path
 * resolution, renames, directories): one session, the command run as
 * `cd DIR && exec ARGV </dev/null`, its exit code, stdout and stderr taken
 * from the session's JSON answer (split as for SDKs from 0.167.0), no
 * wrapper and no files: three requests. See daytona.h.
 */
#include "daytona.h"

#include "hex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copy a JSON string member into buf (cap > 0), "" when absent. 0, or -1
 * when it does not fit or was not valid UTF-8 (the daemon replaced bytes
 * with U+FFFD): the caller then takes the byte-exact path. */
static int text_member(json_object *doc, const char *key, char *buf, size_t cap)
{
    const char *v = sbxp_json_str(doc, key);
    size_t n = v ? strlen(v) : 0;
    buf[0] = '\0';
    if (n >= cap || (v && strstr(v, "\xef\xbf\xbd")))
        return -1;
    if (v)
        memcpy(buf, v, n + 1);
    return 0;
}

int daytona_exec_small(sbx_sandbox *sb, sbx_call *call, const char *cwd, const char *const *argv,
                       int64_t timeout_ms, int *exit_code, char *out, size_t out_cap, char *msg,
                       size_t cap)
{
    struct daytona_state *st = sb->st;
    char hex[25], sid[40];
    int rc = daytona_exec_check_text(st, call, cwd, argv, NULL);
    if (rc != SBX_OK)
        return rc;
    sbxs_random_hex(hex, 12);
    snprintf(sid, sizeof sid, "sbx-%s", hex);
    /* cd DIR && exec ARGV </dev/null: no wrapper, no files */
    char *dir = NULL, *words = NULL;
    size_t dl = 0, dc = 0, wl = 0, wc = 0;
    int bad = daytona_sh_quote(&dir, &dl, &dc, cwd);
    for (size_t i = 0; !bad && argv[i]; i++)
        bad = daytona_sh_quote(&words, &wl, &wc, argv[i]);
    size_t fl = dl + wl + 32;
    char *full = bad ? NULL : malloc(fl);
    if (full)
        snprintf(full, fl, "cd %s && exec %s </dev/null", dir, words);
    free(dir);
    free(words);
    if (!full)
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");

    sbxp_http_error err;
    rc = daytona_tb_session_create(sb, call, sid, argv[0]);
    if (rc != SBX_OK) {
        free(full);
        return rc;
    }
    json_object *body = json_object_new_object();
    json_object_object_add(body, "command", json_object_new_string(full));
    json_object_object_add(body, "runAsync", json_object_new_boolean(0));
    char path[128];
    snprintf(path, sizeof path, "/process/session/%s/exec", sid);
    json_object *doc = NULL;
    rc = daytona_tb_json_split(sb, call, path, body, &doc, timeout_ms, &err);
    json_object_put(body);
    free(full);
    daytona_tb_session_delete(sb, sid);
    if (rc == SBX_E_TIMEOUT && err.http_status == 0) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_TIMEOUT, DT ": %s timed out in sandbox %s", argv[0],
                             sb->id);
    }
    if (rc != SBX_OK) {
        json_object_put(doc);
        return daytona_tb_report(sb, call, &err, "exec %s", argv[0]);
    }
    json_object *ec = NULL;
    if (!json_object_object_get_ex(doc, "exitCode", &ec) || !json_object_is_type(ec, json_type_int)) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": exec: the session answered without an exit code");
    }
    *exit_code = json_object_get_int(ec);
    int usable = !out_cap || (json_object_object_get_ex(doc, "stdout", NULL) &&
                              text_member(doc, "stdout", out, out_cap) == 0);
    if (cap) {
        const char *e = sbxp_json_str(doc, "stderr");
        snprintf(msg, cap, "%s", e ? e : "");
    }
    json_object_put(doc);
    return usable ? SBX_OK : SBX_E_EXISTS; /* else: take the byte-exact path */
}
