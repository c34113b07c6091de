/*
 * schema.c - the JSON Schema subset the tools' inputSchema use, checked
 * before a tool runs: type (object, string, integer, number, boolean,
 * array, or a list of them), properties, required, additionalProperties
 * false, enum, minimum, maximum, minLength, maxLength (in bytes), items.
 * Anything else a schema says (title, description, default) is ignored.
 * Strings holding a NUL are refused wherever a string is expected: no
 * tool argument is meant to carry one, and C sees only the part before it.
 */
#include "internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Nesting of the schemas checked (the tools' are a few levels deep). */
#define SCHEMA_MAX_DEPTH 16

static bool fail(char *why, size_t len, const char *fmt, ...) SBX_PRINTF_LIKE(3, 4);
static bool fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return false;
}

static bool type_is(const char *t, json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_object: return !strcmp(t, "object");
    case json_type_array: return !strcmp(t, "array");
    case json_type_string: return !strcmp(t, "string");
    case json_type_boolean: return !strcmp(t, "boolean");
    case json_type_int: return !strcmp(t, "integer") || !strcmp(t, "number");
    case json_type_double: {
        double d = json_object_get_double(v);
        if (!strcmp(t, "number"))
            return isfinite(d);
        /* 3.0 is an integer in JSON Schema; 1e300 is not one we keep */
        return !strcmp(t, "integer") && isfinite(d) && d > -9007199254740992.0 &&
               d < 9007199254740992.0 && d == (double)(int64_t)d;
    }
    case json_type_null: return !strcmp(t, "null");
    }
    return false;
}

static const char *type_name(json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_object: return "an object";
    case json_type_array: return "an array";
    case json_type_string: return "a string";
    case json_type_boolean: return "a boolean";
    case json_type_int:
    case json_type_double: return "a number";
    case json_type_null: return "null";
    }
    return "something else";
}

static bool check(json_object *schema, json_object *value, const char *where, char *why,
                  size_t whylen, int depth)
{
    if (depth > SCHEMA_MAX_DEPTH)
        return fail(why, whylen, "%s: nested too deep", where);
    if (!json_object_is_type(schema, json_type_object))
        return true; /* `true` or a missing schema: anything */
    json_object *t;
    if (json_object_object_get_ex(schema, "type", &t)) {
        bool ok = false;
        const char *want = "?";
        if (json_object_is_type(t, json_type_string)) {
            want = json_object_get_string(t);
            ok = type_is(want, value);
        } else if (json_object_is_type(t, json_type_array)) {
            size_t n = json_object_array_length(t);
            for (size_t i = 0; i < n && !ok; i++) {
                json_object *ti = json_object_array_get_idx(t, i);
                if (json_object_is_type(ti, json_type_string))
                    ok = type_is(json_object_get_string(ti), value);
            }
            want = "one of the allowed types";
        }
        if (!ok)
            return fail(why, whylen, "%s: expected %s%s, got %s", where,
                        strchr("aeiou", want[0]) ? "an " : "a ", want, type_name(value));
    }
    json_object *e;
    if (json_object_object_get_ex(schema, "enum", &e) &&
        json_object_is_type(e, json_type_array)) {
        size_t n = json_object_array_length(e);
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = json_object_equal(json_object_array_get_idx(e, i), value) == 1;
        if (!found) {
            char list[256] = "";
            size_t used = 0;
            for (size_t i = 0; i < n && used < sizeof list - 1; i++) {
                int k = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 json_object_to_json_string(json_object_array_get_idx(e, i)));
                if (k < 0)
                    break;
                used += (size_t)k;
            }
            return fail(why, whylen, "%s: expected one of %s", where, list);
        }
    }
    json_type vt = json_object_get_type(value);
    if (vt == json_type_string) {
        size_t len = (size_t)json_object_get_string_len(value);
        if (strlen(json_object_get_string(value)) != len)
            return fail(why, whylen, "%s: the string holds a NUL byte", where);
        json_object *l;
        if (json_object_object_get_ex(schema, "maxLength", &l) &&
            len > (size_t)json_object_get_int64(l))
            return fail(why, whylen, "%s: longer than %lld bytes", where,
                        (long long)json_object_get_int64(l));
        if (json_object_object_get_ex(schema, "minLength", &l) &&
            (int64_t)len < json_object_get_int64(l))
            return fail(why, whylen, "%s: shorter than %lld bytes", where,
                        (long long)json_object_get_int64(l));
    }
    if (vt == json_type_int || vt == json_type_double) {
        double d = json_object_get_double(value);
        json_object *l;
        if (json_object_object_get_ex(schema, "minimum", &l) &&
            (vt == json_type_int ? json_object_get_int64(value) < json_object_get_int64(l)
                                 : d < json_object_get_double(l)))
            return fail(why, whylen, "%s: less than the minimum %s", where,
                        json_object_to_json_string(l));
        if (json_object_object_get_ex(schema, "maximum", &l) &&
            (vt == json_type_int ? json_object_get_int64(value) > json_object_get_int64(l)
                                 : d > json_object_get_double(l)))
            return fail(why, whylen, "%s: more than the maximum %s", where,
                        json_object_to_json_string(l));
    }
    char sub[256];
    if (vt == json_type_array) {
        json_object *items;
        if (json_object_object_get_ex(schema, "items", &items)) {
            size_t n = json_object_array_length(value);
            for (size_t i = 0; i < n; i++) {
                snprintf(sub, sizeof sub, "%.200s[%zu]", where, i);
                if (!check(items, json_object_array_get_idx(value, i), sub, why, whylen,
                           depth + 1))
                    return false;
            }
        }
        json_object *l;
        if (json_object_object_get_ex(schema, "maxItems", &l) &&
            json_object_array_length(value) > (size_t)json_object_get_int64(l))
            return fail(why, whylen, "%s: more than %lld items", where,
                        (long long)json_object_get_int64(l));
    }
    if (vt == json_type_object) {
        json_object *props = NULL, *req, *addl;
        json_object_object_get_ex(schema, "properties", &props);
        if (json_object_object_get_ex(schema, "required", &req) &&
            json_object_is_type(req, json_type_array)) {
            size_t n = json_object_array_length(req);
            for (size_t i = 0; i < n; i++) {
                const char *k = json_object_get_string(json_object_array_get_idx(req, i));
                if (k && !json_object_object_get_ex(value, k, NULL))
                    return fail(why, whylen, "%s: \"%.100s\" is required", where, k);
            }
        }
        bool closed = json_object_object_get_ex(schema, "additionalProperties", &addl) &&
                      json_object_is_type(addl, json_type_boolean) &&
                      !json_object_get_boolean(addl);
        json_object_object_foreach(value, k, v) {
            json_object *ps = NULL;
            bool known = props && json_object_object_get_ex(props, k, &ps);
            snprintf(sub, sizeof sub, "%.120s.%.120s", where, k);
            if (!known) {
                if (closed)
                    return fail(why, whylen, "%s: unknown argument \"%.100s\"", where, k);
                continue;
            }
            if (!check(ps, v, sub, why, whylen, depth + 1))
                return false;
        }
    }
    return true;
}

bool sbxm_schema_check(json_object *schema, json_object *value, const char *where,
                       char *why, size_t whylen)
{
    if (whylen)
        why[0] = '\0';
    return check(schema, value, where ? where : "arguments", why, whylen, 0);
}
