/*
 * pq_lazy.c - forwarders to libpq, which is loaded on first use.
 *
 * Each function below has libpq's exact prototype (the compiler checks it
 * against <libpq-fe.h>) and calls the real one through a pointer resolved
 * the first time any of them, or sbxh_pq_load(), runs. They are hidden inside
 * libsbx, so they never interpose on an application's own libpq. The store
 * calls sbxh_pq_load() first and reports a missing library as an error.
 */
#include "base/pq_lazy.h"

#include "base/lazy_lib.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>

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
} fn;

#define SYMBOL(name) {#name, &fn.name, sizeof fn.name}
static const struct sbx_lazy_symbol symbols[] = {
    SYMBOL(PQclear),
    SYMBOL(PQcmdTuples),
    SYMBOL(PQconndefaults),
    SYMBOL(PQconnectdbParams),
    SYMBOL(PQconnectdb),
    SYMBOL(PQconnectionNeedsPassword),
    SYMBOL(PQconninfoFree),
    SYMBOL(PQconninfoParse),
    SYMBOL(PQerrorMessage),
    SYMBOL(PQexec),
    SYMBOL(PQexecParams),
    SYMBOL(PQexecPrepared),
    SYMBOL(PQfinish),
    SYMBOL(PQfreemem),
    SYMBOL(PQgetisnull),
    SYMBOL(PQgetvalue),
    SYMBOL(PQntuples),
    SYMBOL(PQprepare),
    SYMBOL(PQreset),
    SYMBOL(PQresultErrorField),
    SYMBOL(PQresultStatus),
    SYMBOL(PQsetNoticeProcessor),
    SYMBOL(PQstatus),
    SYMBOL(PQtransactionStatus),
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* empty when loading succeeded */

static void load_once(void)
{
    sbxh_lazy_resolve(SBX_LIBPQ_SONAME, "libpq5", "the PostgreSQL store", symbols,
                      sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

/* Called by every forwarder: false when the library could not be loaded.
 * Only the constructors (which then return NULL) can be reached that way by
 * code that skipped its load check: every other function takes an object
 * one of them made. Nothing aborts. */
static bool ensure_loaded(void)
{
    pthread_once(&once, load_once);
    return failure[0] == '\0';
}

int sbxh_pq_load(sbx_error *err)
{
    pthread_once(&once, load_once);
    if (failure[0])
        return sbx_error_set(err, SBX_E_UNSUPPORTED, "%s", failure);
    return SBX_OK;
}

void PQclear(PGresult *res)
{
    if (!ensure_loaded())
        return;
    fn.PQclear(res);
}

char *PQcmdTuples(PGresult *res)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQcmdTuples(res);
}

PQconninfoOption *PQconndefaults(void)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQconndefaults();
}

PGconn *PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQconnectdbParams(keywords, values, expand_dbname);
}

PGconn *PQconnectdb(const char *conninfo)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQconnectdb(conninfo);
}

int PQconnectionNeedsPassword(const PGconn *conn)
{
    if (!ensure_loaded())
        return -1;
    return fn.PQconnectionNeedsPassword(conn);
}

void PQconninfoFree(PQconninfoOption *opts)
{
    if (!ensure_loaded())
        return;
    fn.PQconninfoFree(opts);
}

PQconninfoOption *PQconninfoParse(const char *conninfo, char **errmsg)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQconninfoParse(conninfo, errmsg);
}

char *PQerrorMessage(const PGconn *conn)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQerrorMessage(conn);
}

PGresult *PQexec(PGconn *conn, const char *query)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQexec(conn, query);
}

PGresult *PQexecParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQexecParams(conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats, resultFormat);
}

PGresult *PQexecPrepared(PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQexecPrepared(conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat);
}

void PQfinish(PGconn *conn)
{
    if (!ensure_loaded())
        return;
    fn.PQfinish(conn);
}

void PQfreemem(void *ptr)
{
    if (!ensure_loaded())
        return;
    fn.PQfreemem(ptr);
}

int PQgetisnull(const PGresult *res, int tup_num, int field_num)
{
    if (!ensure_loaded())
        return -1;
    return fn.PQgetisnull(res, tup_num, field_num);
}

char *PQgetvalue(const PGresult *res, int tup_num, int field_num)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQgetvalue(res, tup_num, field_num);
}

int PQntuples(const PGresult *res)
{
    if (!ensure_loaded())
        return -1;
    return fn.PQntuples(res);
}

PGresult *PQprepare(PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQprepare(conn, stmtName, query, nParams, paramTypes);
}

void PQreset(PGconn *conn)
{
    if (!ensure_loaded())
        return;
    fn.PQreset(conn);
}

char *PQresultErrorField(const PGresult *res, int fieldcode)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQresultErrorField(res, fieldcode);
}

ExecStatusType PQresultStatus(const PGresult *res)
{
    if (!ensure_loaded())
        return PGRES_FATAL_ERROR;
    return fn.PQresultStatus(res);
}

PQnoticeProcessor PQsetNoticeProcessor(PGconn *conn, PQnoticeProcessor proc, void *arg)
{
    if (!ensure_loaded())
        return NULL;
    return fn.PQsetNoticeProcessor(conn, proc, arg);
}

ConnStatusType PQstatus(const PGconn *conn)
{
    if (!ensure_loaded())
        return CONNECTION_BAD;
    return fn.PQstatus(conn);
}

PGTransactionStatusType PQtransactionStatus(const PGconn *conn)
{
    if (!ensure_loaded())
        return PQTRANS_UNKNOWN;
    return fn.PQtransactionStatus(conn);
}
