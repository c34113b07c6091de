/*
 * schema.c - the schema migrations of the session store, side by side
 * for both dialects so that the two drivers keep the same tables.
 *
 * Rules: a migration is never edited once released; changes are new
 * migrations appended with the next version. Times are BIGINT milliseconds
 * since the Unix epoch. Text keys compare bytewise on both drivers (SQLite's
 * BINARY collation, PostgreSQL's "C"), so listings have the same order.
 */
#include "store/store.h"

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
    {
        2,
        "memory stores: stores, commits, file versions, heads",
        /* SQLite */
        "CREATE TABLE memory_stores ("
        "  slug TEXT NOT NULL PRIMARY KEY,"
        "  version INTEGER NOT NULL,"
        "  files INTEGER NOT NULL,"
        "  bytes INTEGER NOT NULL,"
        "  max_file_bytes INTEGER NOT NULL,"
        "  max_files INTEGER NOT NULL,"
        "  max_total_bytes INTEGER NOT NULL,"
        "  created_at INTEGER NOT NULL"
        ") WITHOUT ROWID;"
        "CREATE TABLE memory_commits ("
        "  slug TEXT NOT NULL REFERENCES memory_stores (slug),"
        "  version INTEGER NOT NULL,"
        "  author TEXT NOT NULL,"
        "  changes INTEGER NOT NULL,"
        "  created_at INTEGER NOT NULL,"
        "  PRIMARY KEY (slug, version)"
        ") WITHOUT ROWID;"
        "CREATE TABLE memory_versions ("
        "  slug TEXT NOT NULL,"
        "  path TEXT NOT NULL,"
        "  version INTEGER NOT NULL,"
        "  deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),"
        "  sha256 TEXT,"
        "  size INTEGER NOT NULL,"
        "  content BLOB,"
        "  PRIMARY KEY (slug, path, version),"
        "  FOREIGN KEY (slug, version) REFERENCES memory_commits (slug, version)"
        ");"
        "CREATE INDEX memory_versions_by_version ON memory_versions (slug, version);"
        "CREATE TABLE memory_heads ("
        "  slug TEXT NOT NULL,"
        "  path TEXT NOT NULL,"
        "  version INTEGER NOT NULL,"
        "  deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),"
        "  sha256 TEXT,"
        "  size INTEGER NOT NULL,"
        "  PRIMARY KEY (slug, path),"
        "  FOREIGN KEY (slug) REFERENCES memory_stores (slug)"
        ") WITHOUT ROWID;",
        /* PostgreSQL */
        "CREATE TABLE memory_stores ("
        "  slug TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
        "  version BIGINT NOT NULL,"
        "  files BIGINT NOT NULL,"
        "  bytes BIGINT NOT NULL,"
        "  max_file_bytes BIGINT NOT NULL,"
        "  max_files BIGINT NOT NULL,"
        "  max_total_bytes BIGINT NOT NULL,"
        "  created_at BIGINT NOT NULL"
        ");"
        "CREATE TABLE memory_commits ("
        "  slug TEXT COLLATE \"C\" NOT NULL REFERENCES memory_stores (slug),"
        "  version BIGINT NOT NULL,"
        "  author TEXT NOT NULL,"
        "  changes BIGINT NOT NULL,"
        "  created_at BIGINT NOT NULL,"
        "  PRIMARY KEY (slug, version)"
        ");"
        "CREATE TABLE memory_versions ("
        "  slug TEXT COLLATE \"C\" NOT NULL,"
        "  path TEXT COLLATE \"C\" NOT NULL,"
        "  version BIGINT NOT NULL,"
        "  deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),"
        "  sha256 TEXT,"
        "  size BIGINT NOT NULL,"
        "  content BYTEA,"
        "  PRIMARY KEY (slug, path, version),"
        "  FOREIGN KEY (slug, version) REFERENCES memory_commits (slug, version)"
        ");"
        "CREATE INDEX memory_versions_by_version ON memory_versions (slug, version);"
        "CREATE TABLE memory_heads ("
        "  slug TEXT COLLATE \"C\" NOT NULL REFERENCES memory_stores (slug),"
        "  path TEXT COLLATE \"C\" NOT NULL,"
        "  version BIGINT NOT NULL,"
        "  deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),"
        "  sha256 TEXT,"
        "  size BIGINT NOT NULL,"
        "  PRIMARY KEY (slug, path)"
        ");",
    },
    {
        3,
        "the manifest digest of each session",
        /* SQLite */
        "CREATE TABLE session_manifests ("
        "  session_key TEXT NOT NULL PRIMARY KEY,"
        "  manifest_digest TEXT NOT NULL,"
        "  updated_at INTEGER NOT NULL"
        ") WITHOUT ROWID;",
        /* PostgreSQL */
        "CREATE TABLE session_manifests ("
        "  session_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
        "  manifest_digest TEXT NOT NULL,"
        "  updated_at BIGINT NOT NULL"
        ");",
    },
    {
        4,
        "the memory stores attached to each session and their writeback state",
        /* SQLite */
        "CREATE TABLE session_memory ("
        "  session_key TEXT NOT NULL,"
        "  slug TEXT NOT NULL,"
        "  access INTEGER NOT NULL,"
        "  baseline INTEGER NOT NULL,"
        "  state INTEGER NOT NULL,"
        "  updated_at INTEGER NOT NULL,"
        "  PRIMARY KEY (session_key, slug)"
        ") WITHOUT ROWID;",
        /* PostgreSQL */
        "CREATE TABLE session_memory ("
        "  session_key TEXT COLLATE \"C\" NOT NULL,"
        "  slug TEXT COLLATE \"C\" NOT NULL,"
        "  access INTEGER NOT NULL,"
        "  baseline BIGINT NOT NULL,"
        "  state INTEGER NOT NULL,"
        "  updated_at BIGINT NOT NULL,"
        "  PRIMARY KEY (session_key, slug)"
        ");",
    },
    {
        5,
        "the run_as user of each session's manifest",
        /* SQLite: NULL for a manifest without run_as (and for rows of
         * sessions provisioned before) */
        "ALTER TABLE session_manifests ADD COLUMN run_as TEXT;",
        /* PostgreSQL */
        "ALTER TABLE session_manifests ADD COLUMN run_as TEXT;",
    },
    {
        6,
        "warm pools: pool members and the key each session's sandbox was made under",
        /* SQLite. A member row is written before its sandbox is created
         * (state creating, the worker's owner token), so a refill killed at
         * any step leaves a row the reconciler cleans. session_sandboxes
         * holds, for a session that claimed a member, the member key its
         * sandbox was created under (attach and destroy use its hash). */
        "CREATE TABLE pool_members ("
        "  member_key TEXT NOT NULL PRIMARY KEY,"
        "  pool TEXT NOT NULL,"
        "  provider TEXT NOT NULL,"
        "  spec_hash TEXT NOT NULL,"
        "  external_id TEXT,"
        "  state TEXT NOT NULL"
        "    CHECK (state IN ('creating', 'ready', 'checking', 'claimed')),"
        "  owner TEXT NOT NULL,"
        "  claimed_by TEXT,"
        "  created_at INTEGER NOT NULL,"
        "  updated_at INTEGER NOT NULL"
        ") WITHOUT ROWID;"
        "CREATE INDEX pool_members_by_state ON pool_members (pool, state, created_at);"
        "CREATE TABLE session_sandboxes ("
        "  session_key TEXT NOT NULL PRIMARY KEY,"
        "  sandbox_key TEXT NOT NULL,"
        "  pool TEXT NOT NULL,"
        "  updated_at INTEGER NOT NULL"
        ") WITHOUT ROWID;",
        /* PostgreSQL */
        "CREATE TABLE pool_members ("
        "  member_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
        "  pool TEXT COLLATE \"C\" NOT NULL,"
        "  provider TEXT NOT NULL,"
        "  spec_hash TEXT NOT NULL,"
        "  external_id TEXT,"
        "  state TEXT NOT NULL"
        "    CHECK (state IN ('creating', 'ready', 'checking', 'claimed')),"
        "  owner TEXT NOT NULL,"
        "  claimed_by TEXT,"
        "  created_at BIGINT NOT NULL,"
        "  updated_at BIGINT NOT NULL"
        ");"
        "CREATE INDEX pool_members_by_state ON pool_members (pool, state, created_at);"
        "CREATE TABLE session_sandboxes ("
        "  session_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
        "  sandbox_key TEXT NOT NULL,"
        "  pool TEXT NOT NULL,"
        "  updated_at BIGINT NOT NULL"
        ");",
    },
    {
        7,
        "the last use and the paused mark of each session",
        /* SQLite: paused is 0/1; a session without a row (provisioned
         * before this migration) counts as last used when it was bound */
        "CREATE TABLE session_activity ("
        "  session_key TEXT NOT NULL PRIMARY KEY,"
        "  last_used_at INTEGER NOT NULL,"
        "  paused INTEGER NOT NULL CHECK (paused IN (0, 1))"
        ") WITHOUT ROWID;",
        /* PostgreSQL */
        "CREATE TABLE session_activity ("
        "  session_key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,"
        "  last_used_at BIGINT NOT NULL,"
        "  paused INTEGER NOT NULL CHECK (paused IN (0, 1))"
        ");",
    },
};

const struct sbx_store_migration *sbxh_store_migrations(size_t *count)
{
    _Static_assert(sizeof migrations / sizeof migrations[0] > 0, "no migrations");
    *count = sizeof migrations / sizeof migrations[0];
    /* versions ascend and the last one is SBX_STORE_SCHEMA_VERSION
     * (tests/store checks it) */
    return migrations;
}
