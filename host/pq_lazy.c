/*
 * pq_lazy.c - forwarders to libpq, which is loaded on first use.
 *
 * Each function below has libpq's exact prototype (the compiler checks it
 * against <libpq-fe.h>) and calls the real one through a pointer resolved
 * the first time any of them, or sbx_pq_load(), runs. They are hidden inside
 * libsbx, so they never interpose on an application's own libpq. The store
 * calls sbx_pq_load() first and reports a missing library as an error.
 */
#include "pq_lazy.h"

#include "lazy_lib.h"

#include <libpq-fe.h>
#include <pthread.h>

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
    sbx_lazy_resolve(SBX_LIBPQ_SONAME, "libpq5", "the PostgreSQL store", symbols,
                     sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

/* Called by every forwarder. */
static void ensure_loaded(void)
{
    pthread_once(&once, load_once);
    if (failure[0])
        sbx_lazy_missing(failure);
}

int sbx_pq_load(sbx_error *err)
{
    pthread_once(&once, load_once);
    if (failure[0])
        return sbx_error_set(err, SBX_E_UNSUPPORTED, "%s", failure);
    return SBX_OK;
}

void PQclear(PGresult *res)
{
    ensure_loaded();
    fn.PQclear(res);
}

char *PQcmdTuples(PGresult *res)
{
    ensure_loaded();
    return fn.PQcmdTuples(res);
}

PQconninfoOption *PQconndefaults(void)
{
    ensure_loaded();
    return fn.PQconndefaults();
}

PGconn *PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname)
{
    ensure_loaded();
    return fn.PQconnectdbParams(keywords, values, expand_dbname);
}

PGconn *PQconnectdb(const char *conninfo)
{
    ensure_loaded();
    return fn.PQconnectdb(conninfo);
}

int PQconnectionNeedsPassword(const PGconn *conn)
{
    ensure_loaded();
    return fn.PQconnectionNeedsPassword(conn);
}

void PQconninfoFree(PQconninfoOption *opts)
{
    ensure_loaded();
    fn.PQconninfoFree(opts);
}

PQconninfoOption *PQconninfoParse(const char *conninfo, char **errmsg)
{
    ensure_loaded();
    return fn.PQconninfoParse(conninfo, errmsg);
}

char *PQerrorMessage(const PGconn *conn)
{
    ensure_loaded();
    return fn.PQerrorMessage(conn);
}

PGresult *PQexec(PGconn *conn, const char *query)
{
    ensure_loaded();
    return fn.PQexec(conn, query);
}

PGresult *PQexecParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat)
{
    ensure_loaded();
    return fn.PQexecParams(conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats, resultFormat);
}

PGresult *PQexecPrepared(PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, const int *paramLengths, const int *paramFormats, int resultFormat)
{
    ensure_loaded();
    return fn.PQexecPrepared(conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat);
}

void PQfinish(PGconn *conn)
{
    ensure_loaded();
    fn.PQfinish(conn);
}

void PQfreemem(void *ptr)
{
    ensure_loaded();
    fn.PQfreemem(ptr);
}

int PQgetisnull(const PGresult *res, int tup_num, int field_num)
{
    ensure_loaded();
    return fn.PQgetisnull(res, tup_num, field_num);
}

char *PQgetvalue(const PGresult *res, int tup_num, int field_num)
{
    ensure_loaded();
    return fn.PQgetvalue(res, tup_num, field_num);
}

int PQntuples(const PGresult *res)
{
    ensure_loaded();
    return fn.PQntuples(res);
}

PGresult *PQprepare(PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes)
{
    ensure_loaded();
    return fn.PQprepare(conn, stmtName, query, nParams, paramTypes);
}

void PQreset(PGconn *conn)
{
    ensure_loaded();
    fn.PQreset(conn);
}

char *PQresultErrorField(const PGresult *res, int fieldcode)
{
    ensure_loaded();
    return fn.PQresultErrorField(res, fieldcode);
}

ExecStatusType PQresultStatus(const PGresult *res)
{
    ensure_loaded();
    return fn.PQresultStatus(res);
}

PQnoticeProcessor PQsetNoticeProcessor(PGconn *conn, PQnoticeProcessor proc, void *arg)
{
    ensure_loaded();
    return fn.PQsetNoticeProcessor(conn, proc, arg);
}

ConnStatusType PQstatus(const PGconn *conn)
{
    ensure_loaded();
    return fn.PQstatus(conn);
}

PGTransactionStatusType PQtransactionStatus(const PGconn *conn)
{
    ensure_loaded();
    return fn.PQtransactionStatus(conn);
}
