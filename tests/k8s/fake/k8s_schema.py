"""k8s_schema.py - what the API server does with a custom resource's
structural schema (crd_schemas.json, generated from the published CRDs by
gen_crd_schemas.py): unknown fields pruned (or refused with
fieldValidation=Strict), defaults applied, types, required fields, enums,
minimums, lengths, patterns and date-times checked. CEL rules
(x-kubernetes-validations) are not evaluated."""
import json
import os
import re
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "crd_schemas.json")) as _f:
    SCHEMAS = {k: v["schema"] for k, v in json.load(_f).items()}


def _datetime_ok(s):
    try:
        datetime.fromisoformat(s.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


def _check(schema, value, path, errs, unknown):
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errs.append((path, "Invalid value: must be an integer or a string"))
        return
    t = schema.get("type")
    if value is None:
        if not schema.get("nullable"):
            errs.append((path, "Invalid value: \"null\": %s in body must be of type %s" % (path, t)))
        return
    typeok = {"object": lambda v: isinstance(v, dict),
              "array": lambda v: isinstance(v, list),
              "string": lambda v: isinstance(v, str),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "boolean": lambda v: isinstance(v, bool)}.get(t)
    if typeok and not typeok(value):
        errs.append((path, "Invalid value: %s: %s in body must be of type %s" % (
            json.dumps(value)[:60], path, t)))
        return
    if "enum" in schema and value not in schema["enum"]:
        errs.append((path, "Unsupported value: %s: supported values: %s" % (
            json.dumps(value), ", ".join(json.dumps(e) for e in schema["enum"]))))
    if t == "object":
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        keep = schema.get("x-kubernetes-preserve-unknown-fields")
        for k in list(value):
            sub = "%s.%s" % (path, k) if path else k
            if props is not None and k in props:
                _check(props[k], value[k], sub, errs, unknown)
            elif isinstance(addl, dict):
                _check(addl, value[k], sub, errs, unknown)
            elif keep or addl is True:
                continue
            else:
                unknown.append(sub)
                del value[k]
        for k, p in (props or {}).items():
            if k not in value and "default" in p:
                value[k] = json.loads(json.dumps(p["default"]))
        for r in schema.get("required") or []:
            if r not in value:
                errs.append(("%s.%s" % (path, r) if path else r, "Required value"))
    elif t == "array":
        items = schema.get("items")
        if items:
            for i, v in enumerate(value):
                _check(items, v, "%s[%d]" % (path, i), errs, unknown)
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append((path, "Too many: %d: must have at most %d items" % (len(value), schema["maxItems"])))
    elif t == "string":
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append((path, "Too long: may not be more than %d bytes" % schema["maxLength"]))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append((path, "Invalid value: %s: %s in body should be at least %d chars long" % (
                json.dumps(value), path, schema["minLength"])))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errs.append((path, "Invalid value: %s: %s in body should match '%s'" % (
                json.dumps(value), path, schema["pattern"])))
        if schema.get("format") == "date-time" and not _datetime_ok(value):
            errs.append((path, "Invalid value: %s: %s in body must be of type date-time" % (
                json.dumps(value), path)))
    elif t in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append((path, "Invalid value: %s: %s in body should be greater than or equal to %s" % (
                value, path, schema["minimum"])))
        if "maximum" in schema and value > schema["maximum"]:
            errs.append((path, "Invalid value: %s: %s in body should be less than or equal to %s" % (
                value, path, schema["maximum"])))


def validate(plural, obj, parts=("spec", "status")):
    """Checks and prunes obj's parts in place; returns (errors, unknown
    field paths). errors are (field, message) pairs."""
    schema = SCHEMAS[plural]
    errs, unknown = [], []
    props = schema.get("properties") or {}
    for k in list(obj):
        if k in ("apiVersion", "kind", "metadata"):
            continue
        if k not in props:
            unknown.append(k)
            del obj[k]
        elif k in parts:
            _check(props[k], obj[k], k, errs, unknown)
    for r in schema.get("required") or []:
        if r in parts and r not in obj:
            errs.append((r, "Required value"))
    return errs, unknown
