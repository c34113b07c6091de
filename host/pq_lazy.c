/*
 * pq_lazy.c - forwarders to libpq, which is dlopened on first use.
 *
 * Each function below has libpq's exact prototype (checked by the compiler
 * against <libpq-fe.h>) and calls the real one through a pointer resolved by
 * sbx_pq_load(). They are hidden inside libsbx, so they never interpose on
 * an application's own libpq. The store calls sbx_pq_load() first and
 * reports a missing library as an error; a forwarder reached without a
 * loaded library (a broken install used by code that skipped that check)
 * stops the process with a message rather than jump through NULL.
 */
#include "pq_lazy.h"

#include <dlfcn.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    void (*PQclear)(PGresult *res);
    char * (*PQcmdTuples)(PGresult *res);
    PQconninfoOption * (*PQconndefaults)(void);
    PGconn * (*PQconnectdbParams)(const char *const *keywords, const char *const *values, int expand_dbname);
    PGconn * (*PQconnectdb)(const char *conninfo);
    int (*PQconnectionNeedsPassword)(const PGconn *conn);
    void (*PQconninfoFree)(PQconninfoOption *opts);
    PQconninfoOption * (*PQconninfoParse)(const char *conninfo, char **errmsg);
    char * (*PQerrorMessage)(const PGconn *conn);
    PGresult * (*PQexec)(PGconn *conn, const char *query);
    PGresult * (*PQexecParams)(PGconn *conn, const char *command, int nParams, const Oid *paramTypes, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat);
    PGresult * (*PQexecPrepared)(PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat);
    void (*PQfinish)(PGconn *conn);
    void (*PQfreemem)(void *ptr);
    int (*PQgetisnull)(const PGresult *res, int tup_num, int field_num);
    char * (*PQgetvalue)(const PGresult *res, int tup_num, int field_num);
    int (*PQntuples)(const PGresult *res);
    PGresult * (*PQprepare)(PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes);
    void (*PQreset)(PGconn *conn);
    char * (*PQresultErrorField)(const PGresult *res, int fieldcode);
    ExecStatusType (*PQresultStatus)(const PGresult *res);
    PQnoticeProcessor (*PQsetNoticeProcessor)(PGconn *conn, PQnoticeProcessor proc, void *arg);
    ConnStatusType (*PQstatus)(const PGconn *conn);
    PGTransactionStatusType (*PQtransactionStatus)(const PGconn *conn);
} pq;

static pthread_once_t pq_once = PTHREAD_ONCE_INIT;
static char pq_failure[512]; /* empty when loading succeeded */

/* dlsym returns void *; converting it to a function pointer is what POSIX
 * specifies for dlsym, done through memcpy to stay within ISO C. */
static int resolve(void *lib, const char *name, void *slot, size_t size)
{
    void *sym = dlsym(lib, name);
    if (!sym) {
        const char *why = dlerror();
        snprintf(pq_failure, sizeof pq_failure, "%s lacks %s: %s",
                 SBX_LIBPQ_SONAME, name, why ? why : "no such symbol");
        return -1;
    }
    memcpy(slot, &sym, size);
    return 0;
}

#define RESOLVE(lib, fn) resolve((lib), #fn, &pq.fn, sizeof pq.fn)

static void load_once(void)
{
    void *lib = dlopen(SBX_LIBPQ_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(pq_failure, sizeof pq_failure,
                 "the PostgreSQL store needs %s (Debian package libpq5): %s",
                 SBX_LIBPQ_SONAME, why ? why : "cannot be loaded");
        return;
    }
    if (RESOLVE(lib, PQclear) ||
        RESOLVE(lib, PQcmdTuples) ||
        RESOLVE(lib, PQconndefaults) ||
        RESOLVE(lib, PQconnectdbParams) ||
        RESOLVE(lib, PQconnectdb) ||
        RESOLVE(lib, PQconnectionNeedsPassword) ||
        RESOLVE(lib, PQconninfoFree) ||
        RESOLVE(lib, PQconninfoParse) ||
        RESOLVE(lib, PQerrorMessage) ||
        RESOLVE(lib, PQexec) ||
        RESOLVE(lib, PQexecParams) ||
        RESOLVE(lib, PQexecPrepared) ||
        RESOLVE(lib, PQfinish) ||
        RESOLVE(lib, PQfreemem) ||
        RESOLVE(lib, PQgetisnull) ||
        RESOLVE(lib, PQgetvalue) ||
        RESOLVE(lib, PQntuples) ||
        RESOLVE(lib, PQprepare) ||
        RESOLVE(lib, PQreset) ||
        RESOLVE(lib, PQresultErrorField) ||
        RESOLVE(lib, PQresultStatus) ||
        RESOLVE(lib, PQsetNoticeProcessor) ||
        RESOLVE(lib, PQstatus) ||
        RESOLVE(lib, PQtransactionStatus))
        return; /* pq_failure says which symbol; keep lib mapped */
}

/* The table, loaded; called by every forwarder. */
static void ensure_loaded(void)
{
    pthread_once(&pq_once, load_once);
    if (pq_failure[0]) {
        fprintf(stderr, "sbx: %s\n", pq_failure);
        abort();
    }
}

int sbx_pq_load(sbx_error *err)
{
    pthread_once(&pq_once, load_once);
    if (pq_failure[0])
        return sbx_error_set(err, SBX_E_UNSUPPORTED, "%s", pq_failure);
    return SBX_OK;
}

void PQclear(PGresult *res)
{
    ensure_loaded();
    pq.PQclear(res);
}

char * PQcmdTuples(PGresult *res)
{
    ensure_loaded();
    return pq.PQcmdTuples(res);
}

PQconninfoOption * PQconndefaults(void)
{
    ensure_loaded();
    return pq.PQconndefaults();
}

PGconn * PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname)
{
    ensure_loaded();
    return pq.PQconnectdbParams(keywords, values, expand_dbname);
}

PGconn * PQconnectdb(const char *conninfo)
{
    ensure_loaded();
    return pq.PQconnectdb(conninfo);
}

int PQconnectionNeedsPassword(const PGconn *conn)
{
    ensure_loaded();
    return pq.PQconnectionNeedsPassword(conn);
}

void PQconninfoFree(PQconninfoOption *opts)
{
    ensure_loaded();
    pq.PQconninfoFree(opts);
}

PQconninfoOption * PQconninfoParse(const char *conninfo, char **errmsg)
{
    ensure_loaded();
    return pq.PQconninfoParse(conninfo, errmsg);
}

char * PQerrorMessage(const PGconn *conn)
{
    ensure_loaded();
    return pq.PQerrorMessage(conn);
}

PGresult * PQexec(PGconn *conn, const char *query)
{
    ensure_loaded();
    return pq.PQexec(conn, query);
}

PGresult * PQexecParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat)
{
    ensure_loaded();
    return pq.PQexecParams(conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats, resultFormat);
}

PGresult * PQexecPrepared(PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat)
{
    ensure_loaded();
    return pq.PQexecPrepared(conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat);
}

void PQfinish(PGconn *conn)
{
    ensure_loaded();
    pq.PQfinish(conn);
}

void PQfreemem(void *ptr)
{
    ensure_loaded();
    pq.PQfreemem(ptr);
}

int PQgetisnull(const PGresult *res, int tup_num, int field_num)
{
    ensure_loaded();
    return pq.PQgetisnull(res, tup_num, field_num);
}

char * PQgetvalue(const PGresult *res, int tup_num, int field_num)
{
    ensure_loaded();
    return pq.PQgetvalue(res, tup_num, field_num);
}

int PQntuples(const PGresult *res)
{
    ensure_loaded();
    return pq.PQntuples(res);
}

PGresult * PQprepare(PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes)
{
    ensure_loaded();
    return pq.PQprepare(conn, stmtName, query, nParams, paramTypes);
}

void PQreset(PGconn *conn)
{
    ensure_loaded();
    pq.PQreset(conn);
}

char * PQresultErrorField(const PGresult *res, int fieldcode)
{
    ensure_loaded();
    return pq.PQresultErrorField(res, fieldcode);
}

ExecStatusType PQresultStatus(const PGresult *res)
{
    ensure_loaded();
    return pq.PQresultStatus(res);
}

PQnoticeProcessor PQsetNoticeProcessor(PGconn *conn, PQnoticeProcessor proc, void *arg)
{
    ensure_loaded();
    return pq.PQsetNoticeProcessor(conn, proc, arg);
}

ConnStatusType PQstatus(const PGconn *conn)
{
    ensure_loaded();
    return pq.PQstatus(conn);
}

PGTransactionStatusType PQtransactionStatus(const PGconn *conn)
{
    ensure_loaded();
    return pq.PQtransactionStatus(conn);
}
