/*
 * rows.c - turning the rows of a driver's query into bindings,
 * intents and pages of them (column layouts in store/driver.h).
 */
#include "store/driver.h"

#include <stdlib.h>
#include <string.h>

static char *col_dup(struct sbx_store_cursor *c, int col, bool *failed)
{
    return sbxh_store_strdup(c->text(c, col), failed);
}

static int read_binding(struct sbx_store *s, struct sbx_store_cursor *c,
                        struct sbx_binding *b, sbx_error *err)
{
    bool failed = false;
    b->session_key = col_dup(c, 0, &failed);
    b->provider = col_dup(c, 1, &failed);
    b->external_id = col_dup(c, 2, &failed);
    b->spec_hash = col_dup(c, 3, &failed);
    b->created_at = c->integer(c, 4);
    const char *state = c->text(c, 5);
    b->deleting = state && strcmp(state, "deleting") == 0;
    if (failed) {
        sbxh_binding_clear(b);
        return sbxh_store_nomem(s, err);
    }
    return SBX_OK;
}

static int read_intent(struct sbx_store *s, struct sbx_store_cursor *c,
                       struct sbx_intent *in, sbx_error *err)
{
    bool failed = false;
    in->session_key = col_dup(c, 0, &failed);
    in->provider = col_dup(c, 1, &failed);
    in->owner = col_dup(c, 2, &failed);
    in->spec_hash = col_dup(c, 3, &failed);
    in->external_id = col_dup(c, 4, &failed);
    in->step = col_dup(c, 5, &failed);
    in->created_at = c->integer(c, 6);
    in->updated_at = c->integer(c, 7);
    in->age_ms = c->integer(c, 8);
    if (failed) {
        sbxh_intent_clear(in);
        return sbxh_store_nomem(s, err);
    }
    return SBX_OK;
}

static int read_key(struct sbx_store *s, struct sbx_store_cursor *c, char **key,
                    sbx_error *err)
{
    bool failed = false;
    *key = col_dup(c, 0, &failed);
    return failed ? sbxh_store_nomem(s, err) : SBX_OK;
}

int sbxh_store_first_binding(struct sbx_store *s, struct sbx_store_cursor *c,
                             struct sbx_binding *out, bool *found, sbx_error *err)
{
    int rc = c->next(c, found, err);
    if (rc == SBX_OK && *found)
        rc = read_binding(s, c, out, err);
    return rc;
}

int sbxh_store_first_intent(struct sbx_store *s, struct sbx_store_cursor *c,
                            struct sbx_intent *out, bool *found, sbx_error *err)
{
    int rc = c->next(c, found, err);
    if (rc == SBX_OK && *found)
        rc = read_intent(s, c, out, err);
    return rc;
}

/* Allocate the page's array for limit items up front: a driver may not know
 * the number of rows before reading them. */
static int page_alloc(struct sbx_store *s, enum sbx_store_list which, size_t limit,
                      union sbx_store_page_out out, sbx_error *err)
{
    bool ok;
    switch (which) {
    case SBX_STORE_LIST_BINDINGS:
        ok = (out.bindings->items = calloc(limit, sizeof *out.bindings->items)) != NULL;
        break;
    case SBX_STORE_LIST_INTENTS:
        ok = (out.intents->items = calloc(limit, sizeof *out.intents->items)) != NULL;
        break;
    case SBX_STORE_LIST_DELETING:
    default:
        ok = (out.keys->keys = calloc(limit, sizeof *out.keys->keys)) != NULL;
        break;
    }
    return ok ? SBX_OK : sbxh_store_nomem(s, err);
}

/* Read the current row into item i of the page. */
static int page_read(struct sbx_store *s, struct sbx_store_cursor *c,
                     enum sbx_store_list which, size_t i, union sbx_store_page_out out,
                     sbx_error *err)
{
    switch (which) {
    case SBX_STORE_LIST_BINDINGS:
        return read_binding(s, c, &out.bindings->items[i], err);
    case SBX_STORE_LIST_INTENTS:
        return read_intent(s, c, &out.intents->items[i], err);
    case SBX_STORE_LIST_DELETING:
    default:
        return read_key(s, c, &out.keys->keys[i], err);
    }
}

/* Record the number of items and whether more follow. */
static void page_set(enum sbx_store_list which, union sbx_store_page_out out,
                     size_t count, bool more)
{
    switch (which) {
    case SBX_STORE_LIST_BINDINGS:
        out.bindings->count = count;
        out.bindings->more = more;
        break;
    case SBX_STORE_LIST_INTENTS:
        out.intents->count = count;
        out.intents->more = more;
        break;
    case SBX_STORE_LIST_DELETING:
    default:
        out.keys->count = count;
        out.keys->more = more;
        break;
    }
}

static void page_free(enum sbx_store_list which, union sbx_store_page_out out)
{
    switch (which) {
    case SBX_STORE_LIST_BINDINGS:
        sbxh_binding_page_free(out.bindings);
        break;
    case SBX_STORE_LIST_INTENTS:
        sbxh_intent_page_free(out.intents);
        break;
    case SBX_STORE_LIST_DELETING:
    default:
        sbxh_key_page_free(out.keys);
        break;
    }
}

int sbxh_store_fill_page(struct sbx_store *s, struct sbx_store_cursor *c,
                         enum sbx_store_list which, size_t limit,
                         union sbx_store_page_out out, sbx_error *err)
{
    int rc = page_alloc(s, which, limit, out, err);
    if (rc != SBX_OK)
        return rc;
    size_t count = 0;
    bool more = false;
    for (;;) {
        bool row;
        if ((rc = c->next(c, &row, err)) != SBX_OK || !row)
            break;
        if (count == limit) {
            more = true; /* the extra row: a next page exists */
            break;
        }
        if ((rc = page_read(s, c, which, count, out, err)) != SBX_OK)
            break;
        count++;
    }
    page_set(which, out, count, more);
    if (rc != SBX_OK)
        page_free(which, out);
    return rc;
}
