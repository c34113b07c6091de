/*
 * pg_dsn.c - reading a PostgreSQL connection string for the store:
 * a password-free label for messages, and redaction of secrets from any
 * text libpq produces.
 *
 * libpq's own messages can quote parts of the connection string: parse
 * errors echo fragments (a URI error echoes the whole URI, password
 * included). Every message the store reports goes through these helpers.
 */
#include "store/store.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keywords whose value is a secret. */
static bool is_secret_keyword(const char *kw)
{
    return strcmp(kw, "password") == 0 || strcmp(kw, "sslpassword") == 0;
}

/* Keywords shown in the label, in this order. */
static const char *const label_keywords[] = {"host", "hostaddr", "port", "dbname", "user"};

/* Append "text" to buf (capacity cap), truncating. */
static void append(char *buf, size_t cap, size_t *len, const char *text, size_t n)
{
    if (*len + 1 >= cap)
        return;
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy(buf + *len, text, n);
    *len += n;
    buf[*len] = '\0';
}

void sbxh_pg_dsn_scrub(char *msg, size_t cap, const char *const *secrets, size_t nsecrets)
{
    for (size_t i = 0; i < nsecrets; i++) {
        const char *secret = secrets[i];
        if (!secret || !*secret)
            continue;
        size_t slen = strlen(secret);
        if (!strstr(msg, secret))
            continue;
        char *out = malloc(cap);
        if (!out) {
            /* Cannot rebuild the text: drop it rather than leak. */
            snprintf(msg, cap, "(message withheld: it contained a credential)");
            return;
        }
        size_t len = 0;
        out[0] = '\0';
        const char *p = msg, *hit;
        while ((hit = strstr(p, secret)) != NULL) {
            append(out, cap, &len, p, (size_t)(hit - p));
            append(out, cap, &len, "***", 3);
            p = hit + slen;
        }
        append(out, cap, &len, p, strlen(p));
        memcpy(msg, out, len + 1);
        free(out);
    }
}

/* Whether name is a libpq connection keyword. */
static bool is_keyword(const char *name, size_t n)
{
    PQconninfoOption *defs = PQconndefaults();
    bool found = false;
    for (PQconninfoOption *o = defs; o && o->keyword; o++)
        if (strlen(o->keyword) == n && strncmp(o->keyword, name, n) == 0) {
            found = true;
            break;
        }
    PQconninfoFree(defs);
    return found;
}

/* Whether name (n bytes) is an identifier written as a key in dsn: at the
 * start, after whitespace, '?' or '&', and followed by '='. Such a fragment
 * is an option name the user mistyped, not part of a value. */
static bool is_key_in_dsn(const char *name, size_t n, const char *dsn)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
              name[i] == '_'))
            return false;
    for (const char *p = dsn; *p; p++) {
        if (strncmp(p, name, n) != 0)
            continue;
        bool start = p == dsn || strchr(" \t\n?&", p[-1]);
        const char *q = p + n;
        while (*q == ' ')
            q++;
        if (start && *q == '=')
            return true;
    }
    return false;
}

void sbxh_pg_dsn_scrub_quoted(char *msg, size_t cap, const char *dsn)
{
    char *out = malloc(cap);
    if (!out) {
        snprintf(msg, cap, "(details withheld)");
        return;
    }
    size_t len = 0;
    out[0] = '\0';
    const char *p = msg;
    for (;;) {
        const char *open = strchr(p, '"');
        const char *close = open ? strchr(open + 1, '"') : NULL;
        if (!close)
            break;
        size_t n = (size_t)(close - open - 1);
        append(out, cap, &len, p, (size_t)(open - p) + 1);
        /* Keep option names and lone separators; anything else may be a
         * fragment of the connection string, and so of its password. */
        if (is_keyword(open + 1, n) || is_key_in_dsn(open + 1, n, dsn) ||
            (n == 1 && strchr("=:/@[]?&", open[1])))
            append(out, cap, &len, open + 1, n);
        else
            append(out, cap, &len, "...", 3);
        append(out, cap, &len, "\"", 1);
        p = close + 1;
    }
    append(out, cap, &len, p, strlen(p));
    memcpy(msg, out, len + 1);
    free(out);
}

/* Trim trailing whitespace and fold libpq's "\n\t" continuation lines. */
static void tidy(char *msg)
{
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\t')
            *c = ' ';
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == ' ')
        msg[--n] = '\0';
}

void sbxh_pg_dsn_tidy(char *msg)
{
    tidy(msg);
}

int sbxh_pg_dsn_parse(const char *dsn, struct sbx_pg_dsn *out, sbx_error *err)
{
    memset(out, 0, sizeof *out);
    char *perr = NULL;
    /* A bare word is a database name, as for libpq itself. */
    bool is_conninfo = strchr(dsn, '=') || strncmp(dsn, "postgresql://", 13) == 0 ||
                       strncmp(dsn, "postgres://", 11) == 0;
    if (!is_conninfo) {
        size_t n = strlen(dsn) + sizeof "postgres store dbname=";
        out->label = malloc(n);
        if (!out->label)
            return sbx_error_set(err, SBX_E_NOMEM, "postgres store: out of memory");
        snprintf(out->label, n, "postgres store dbname=%s", dsn);
        return SBX_OK;
    }
    PQconninfoOption *opts = PQconninfoParse(dsn, &perr);
    if (!opts) {
        char msg[SBX_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", perr ? perr : "out of memory");
        PQfreemem(perr);
        tidy(msg);
        sbxh_pg_dsn_scrub_quoted(msg, sizeof msg, dsn);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "postgres store: invalid connection string "
                             "(store.dsn / SBX_STORE_DSN): %s",
                             msg);
    }
    bool failed = false;
    char label[512] = "postgres store";
    size_t len = strlen(label);
    for (size_t k = 0; k < sizeof label_keywords / sizeof label_keywords[0]; k++) {
        for (PQconninfoOption *o = opts; o->keyword; o++) {
            if (!o->val || strcmp(o->keyword, label_keywords[k]) != 0)
                continue;
            char part[300];
            int n = snprintf(part, sizeof part, " %s=%s", o->keyword, o->val);
            append(label, sizeof label, &len, part, n > 0 ? (size_t)n : 0);
        }
    }
    size_t ns = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (o->val && *o->val && is_secret_keyword(o->keyword) &&
            ns < sizeof out->secrets / sizeof out->secrets[0])
            out->secrets[ns++] = sbxh_store_strdup(o->val, &failed);
    PQconninfoFree(opts);
    /* The label itself must not carry a secret (a password equal to the
     * user name, say). */
    sbxh_pg_dsn_scrub(label, sizeof label, (const char *const *)out->secrets, ns);
    out->label = sbxh_store_strdup(label, &failed);
    if (failed) {
        sbxh_pg_dsn_free(out);
        return sbx_error_set(err, SBX_E_NOMEM, "postgres store: out of memory");
    }
    return SBX_OK;
}

void sbxh_pg_dsn_free(struct sbx_pg_dsn *d)
{
    free(d->label);
    for (size_t i = 0; i < sizeof d->secrets / sizeof d->secrets[0]; i++) {
        if (d->secrets[i]) {
            /* Do not leave the password lying around in freed memory. */
            volatile char *p = d->secrets[i];
            while (*p)
                *p++ = '\0';
            free(d->secrets[i]);
        }
    }
    memset(d, 0, sizeof *d);
}
