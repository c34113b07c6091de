/*
 * store_schema.c - the schema migrations of the session store, side by side
 * for both dialects so that the two drivers keep the same tables.
 *
 * Rules: a migration is never edited once released; changes are new
 * migrations appended with the next version. Times are BIGINT milliseconds
 * since the Unix epoch. Text keys compare bytewise on both drivers (SQLite's
 * BINARY collation, PostgreSQL's "C"), so listings have the same order.
 */
#include "store.h"

static const struct sbx_store_migration migrations[] = {
    {
        1,
        "sessions, intents, bindings",
        /* SQLite */
        "CREATE TABLE sessions ("
        "  session_key TEXT NOT NULL PRIMARY KEY,"
        "  state TEXT NOT NULL CHECK (state IN ('active', 'deleting')),"
        "  created_at INTEGER NOT NULL,"
        "  updated_at INTEGER NOT NULL"
        ") WITHOUT ROWID;"
        "CREATE INDEX sessions_deleting ON sessions (session_key)"
        "  WHERE state = 'deleting';"
        "CREATE TABLE intents ("
        "  session_key TEXT NOT NULL PRIMARY KEY"
        "    REFERENCES sessions (session_key),"
        "  provider TEXT NOT NULL,"
        "  owner TEXT NOT NULL,"
        "  spec_hash TEXT,"
        "  external_id TEXT,"
        "  step TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL,"
        "  updated_at INTEGER NOT NULL"
        ") WITHOUT ROWID;"
        "CREATE TABLE bindings ("
        "  session_key TEXT NOT NULL PRIMARY KEY"
        "    REFERENCES sessions (session_key),"
        "  provider TEXT NOT NULL,"
        "  external_id TEXT NOT NULL,"
        "  spec_hash TEXT,"
        "  created_at INTEGER NOT NULL,"
        "  CONSTRAINT bindings_provider_external_id UNIQUE (provider, external_id)"
        ") WITHOUT ROWID;",
        /* PostgreSQL */
        "CREATE TABLE sessions ("
        "  session_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
        "  state TEXT NOT NULL CHECK (state IN ('active', 'deleting')),"
        "  created_at BIGINT NOT NULL,"
        "  updated_at BIGINT NOT NULL"
        ");"
        "CREATE INDEX sessions_deleting ON sessions (session_key)"
        "  WHERE state = 'deleting';"
        "CREATE TABLE intents ("
        "  session_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY"
        "    REFERENCES sessions (session_key),"
        "  provider TEXT NOT NULL,"
        "  owner TEXT NOT NULL,"
        "  spec_hash TEXT,"
        "  external_id TEXT,"
        "  step TEXT NOT NULL,"
        "  created_at BIGINT NOT NULL,"
        "  updated_at BIGINT NOT NULL"
        ");"
        "CREATE TABLE bindings ("
        "  session_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY"
        "    REFERENCES sessions (session_key),"
        "  provider TEXT NOT NULL,"
        "  external_id TEXT NOT NULL,"
        "  spec_hash TEXT,"
        "  created_at BIGINT NOT NULL,"
        "  CONSTRAINT bindings_provider_external_id UNIQUE (provider, external_id)"
        ");",
    },
};

const struct sbx_store_migration *sbx_store_migrations(size_t *count)
{
    _Static_assert(sizeof migrations / sizeof migrations[0] == SBX_STORE_SCHEMA_VERSION,
                   "SBX_STORE_SCHEMA_VERSION must equal the number of migrations");
    *count = sizeof migrations / sizeof migrations[0];
    return migrations;
}
