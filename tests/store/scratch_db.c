/* scratch_db.c - private databases for the store tests and benchmarks. */
#include "scratch_db.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void say(char *why, size_t len, const char *fmt, ...)
{
    if (!why || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* Append a libpq key='value' pair, escaping quotes and backslashes. */
static void append_pair(char **buf, size_t *len, size_t *cap, const char *k, const char *v)
{
    size_t need = *len + strlen(k) + 2 * strlen(v) + 8;
    if (need > *cap) {
        *cap = need * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf)
            return;
    }
    char *p = *buf + *len;
    if (*len)
        *p++ = ' ';
    p += sprintf(p, "%s='", k);
    for (const char *c = v; *c; c++) {
        if (*c == '\'' || *c == '\\')
            *p++ = '\\';
        *p++ = *c;
    }
    *p++ = '\'';
    *p = '\0';
    *len = (size_t)(p - *buf);
}

char *scratch_dsn_with_db(const char *dsn, const char *dbname)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(dsn, &perr);
    if (!opts) {
        PQfreemem(perr);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (o->val && strcmp(o->keyword, "dbname") != 0)
            append_pair(&buf, &len, &cap, o->keyword, o->val);
    append_pair(&buf, &len, &cap, "dbname", dbname);
    PQconninfoFree(opts);
    return buf;
}

static PGconn *pg_connect(const char *dsn, char *why, size_t whylen)
{
    PGconn *c = PQconnectdb(dsn);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        say(why, whylen, "cannot connect to %s: %s", dsn, c ? PQerrorMessage(c) : "oom");
        PQfinish(c);
        return NULL;
    }
    return c;
}

static int pg_exec(PGconn *c, const char *sql, char *why, size_t whylen)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType t = PQresultStatus(r);
    int rc = t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK ? 0 : -1;
    if (rc)
        say(why, whylen, "%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return rc;
}

static void random_hex(char *out, size_t n)
{
    unsigned char b[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, b, sizeof b) < 0)
            memset(b, 0, sizeof b);
        close(fd);
    }
    size_t i;
    for (i = 0; i + 1 < n && i / 2 < sizeof b; i++)
        out[i] = "0123456789abcdef"[(i % 2 ? b[i / 2] : b[i / 2] >> 4) & 0xf];
    out[i] = '\0';
}

int scratch_create(const char *driver, struct scratch_db *db, char *why, size_t whylen)
{
    memset(db, 0, sizeof *db);
    if (strcmp(driver, "sqlite") == 0) {
        db->driver = "sqlite";
        char tmpl[] = "/tmp/sbx-store-test.XXXXXX";
        if (!mkdtemp(tmpl)) {
            say(why, whylen, "mkdtemp: %s", strerror(errno));
            return SCRATCH_FAIL;
        }
        db->dir = strdup(tmpl);
        if (asprintf(&db->target, "%s/sbx.db", tmpl) < 0)
            db->target = NULL;
        return db->dir && db->target ? SCRATCH_OK : SCRATCH_FAIL;
    }
    db->driver = "postgres";
    const char *admin = getenv("SBX_TEST_PG_DSN");
    if (!admin || !*admin) {
        say(why, whylen,
            "SBX_TEST_PG_DSN is not set: start a server with "
            "`scripts/services/postgres.sh start DIR` and export the DSN it prints");
        return SCRATCH_SKIP;
    }
    db->admin_dsn = strdup(admin);
    char rnd[13];
    random_hex(rnd, sizeof rnd);
    if (asprintf(&db->dbname, "sbx_test_%ld_%s", (long)getpid(), rnd) < 0) {
        db->dbname = NULL;
        return SCRATCH_FAIL;
    }
    PGconn *c = pg_connect(admin, why, whylen);
    if (!c)
        return SCRATCH_FAIL;
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db->dbname);
    int rc = pg_exec(c, sql, why, whylen);
    PQfinish(c);
    if (rc != 0) {
        free(db->dbname);
        db->dbname = NULL;
        return SCRATCH_FAIL;
    }
    db->target = scratch_dsn_with_db(admin, db->dbname);
    if (!db->target) {
        say(why, whylen, "SBX_TEST_PG_DSN is not a valid connection string");
        return SCRATCH_FAIL;
    }
    return SCRATCH_OK;
}

void scratch_destroy(struct scratch_db *db)
{
    if (db->dbname && db->admin_dsn) {
        PGconn *c = pg_connect(db->admin_dsn, NULL, 0);
        if (c) {
            char sql[160];
            /* FORCE: a test that failed may have left connections behind. */
            snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)",
                     db->dbname);
            pg_exec(c, sql, NULL, 0);
            PQfinish(c);
        }
    }
    if (db->dir) {
        const char *suffix[] = {"", "-wal", "-shm", "-journal"};
        for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
            char path[512];
            snprintf(path, sizeof path, "%s/sbx.db%s", db->dir, suffix[i]);
            unlink(path);
        }
        rmdir(db->dir);
    }
    free(db->target);
    free(db->dir);
    free(db->dbname);
    free(db->admin_dsn);
    memset(db, 0, sizeof *db);
}

int scratch_exec(const struct scratch_db *db, const char *sql, char *why, size_t whylen)
{
    if (strcmp(db->driver, "sqlite") == 0) {
        sqlite3 *h = NULL;
        int rc = sqlite3_open(db->target, &h);
        if (rc == SQLITE_OK) {
            sqlite3_busy_timeout(h, 10000);
            char *msg = NULL;
            rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
            if (rc != SQLITE_OK)
                say(why, whylen, "%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
            sqlite3_free(msg);
        } else {
            say(why, whylen, "open %s: %s", db->target, sqlite3_errstr(rc));
        }
        sqlite3_close(h);
        return rc == SQLITE_OK ? 0 : -1;
    }
    PGconn *c = pg_connect(db->target, why, whylen);
    if (!c)
        return -1;
    int rc = pg_exec(c, sql, why, whylen);
    PQfinish(c);
    return rc;
}

int scratch_query_int(const struct scratch_db *db, const char *sql, long long *out,
                      char *why, size_t whylen)
{
    *out = 0;
    if (strcmp(db->driver, "sqlite") == 0) {
        sqlite3 *h = NULL;
        sqlite3_stmt *q = NULL;
        int rc = sqlite3_open(db->target, &h);
        if (rc == SQLITE_OK)
            rc = sqlite3_prepare_v2(h, sql, -1, &q, NULL);
        if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
            *out = sqlite3_column_int64(q, 0);
        else
            say(why, whylen, "%s: %s", sql, sqlite3_errmsg(h));
        int ok = rc == SQLITE_OK && q;
        sqlite3_finalize(q);
        sqlite3_close(h);
        return ok ? 0 : -1;
    }
    PGconn *c = pg_connect(db->target, why, whylen);
    if (!c)
        return -1;
    PGresult *r = PQexec(c, sql);
    int rc = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) {
        *out = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        rc = 0;
    } else {
        say(why, whylen, "%s: %s", sql, PQerrorMessage(c));
    }
    PQclear(r);
    PQfinish(c);
    return rc;
}

struct scratch_lock {
    sqlite3 *sq;
    PGconn *pg;
};

void *scratch_lock(const struct scratch_db *db, char *why, size_t whylen)
{
    struct scratch_lock *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    if (strcmp(db->driver, "sqlite") == 0) {
        char *msg = NULL;
        if (sqlite3_open(db->target, &l->sq) != SQLITE_OK ||
            sqlite3_exec(l->sq, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) {
            say(why, whylen, "BEGIN IMMEDIATE: %s", msg ? msg : sqlite3_errmsg(l->sq));
            sqlite3_free(msg);
            scratch_unlock(l);
            return NULL;
        }
        return l;
    }
    l->pg = pg_connect(db->target, why, whylen);
    /* EXCLUSIVE mode lets readers through but blocks every write and row
     * lock on the sessions table. */
    if (!l->pg || pg_exec(l->pg, "BEGIN", why, whylen) != 0 ||
        pg_exec(l->pg, "LOCK TABLE sessions IN EXCLUSIVE MODE", why, whylen) != 0) {
        scratch_unlock(l);
        return NULL;
    }
    return l;
}

void scratch_unlock(void *lock)
{
    struct scratch_lock *l = lock;
    if (!l)
        return;
    if (l->sq) {
        sqlite3_exec(l->sq, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(l->sq);
    }
    if (l->pg)
        PQfinish(l->pg);
    free(l);
}
