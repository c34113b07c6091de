/*
 * scratch_db.h - an empty, private database for one test or benchmark run:
 * a file in a new temporary directory (sqlite) or a new database with a
 * random name on the server named by SBX_TEST_PG_DSN (postgres). Also raw
 * access to it that bypasses the store, to inspect the schema or to hold
 * locks like a competing worker.
 */
#ifndef SBX_TESTS_SCRATCH_DB_H
#define SBX_TESTS_SCRATCH_DB_H

#include <stddef.h>

struct scratch_db {
    const char *driver; /* "sqlite" or "postgres" */
    char *target;       /* what sbxh_store_open takes: a path or a DSN */
    char *dir;          /* sqlite: the temporary directory */
    char *dbname;       /* postgres: the database created */
    char *admin_dsn;    /* postgres: SBX_TEST_PG_DSN */
};

/* Outcome of scratch_create. */
enum { SCRATCH_OK = 0, SCRATCH_SKIP = 1, SCRATCH_FAIL = -1 };

/* Create the database. SCRATCH_SKIP when the driver is postgres and
 * SBX_TEST_PG_DSN is unset; why receives the reason for SKIP/FAIL. */
int scratch_create(const char *driver, struct scratch_db *db, char *why, size_t whylen);

/* Drop the database (or remove the directory) and free db. Safe on a
 * zeroed struct. */
void scratch_destroy(struct scratch_db *db);

/* Build a key=value DSN equal to `dsn` but for database `dbname`; the
 * caller frees it. NULL on a malformed dsn or out of memory. */
char *scratch_dsn_with_db(const char *dsn, const char *dbname);

/* Run SQL on a connection of its own (not the store's). Returns 0, or -1
 * with the reason in why. */
int scratch_exec(const struct scratch_db *db, const char *sql, char *why, size_t whylen);

/* Run a query returning one integer in its first row and column. */
int scratch_query_int(const struct scratch_db *db, const char *sql, long long *out,
                      char *why, size_t whylen);

/* Hold the write lock of the store's tables on a connection of its own, as
 * a worker stuck in a long transaction would, until scratch_unlock. */
void *scratch_lock(const struct scratch_db *db, char *why, size_t whylen);
void scratch_unlock(void *lock);

#endif
