"""k8s_store.py - the object store of the fake Kubernetes API server: the
four agent-sandbox resources, one monotonic resourceVersion, a bounded
event history for watches (older resourceVersions are "compacted": 410),
owner-reference cascades, label and field selectors, JSON merge and JSON
patches, server-side Tables."""
import bisect
import copy
import json
import re
import threading
import time
import uuid
from datetime import datetime, timezone

import k8s_schema

SANDBOX_GROUP = "agents.x-k8s.io"
EXT_GROUP = "extensions.agents.x-k8s.io"
VERSIONS = ["v1beta1", "v1alpha1"]     # the first is the storage version
STORAGE = VERSIONS[0]

READY_COLS = [
    ("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
    ("Reason", "string", ".status.conditions[?(@.type=='Ready')].reason"),
]
AGE = ("Age", "date", ".metadata.creationTimestamp")

# plural -> description, from the CRDs in agent-sandbox/k8s/crds.
RESOURCES = {
    "sandboxes": dict(group=SANDBOX_GROUP, kind="Sandbox", singular="sandbox",
                      short=["sandbox"], cols=READY_COLS + [AGE], scale=True),
    "sandboxclaims": dict(group=EXT_GROUP, kind="SandboxClaim", singular="sandboxclaim",
                          short=["sandboxclaim"],
                          cols=[READY_COLS[0], ("Sandbox", "string", ".status.sandbox.name"),
                                READY_COLS[1], AGE], scale=False),
    "sandboxtemplates": dict(group=EXT_GROUP, kind="SandboxTemplate",
                             singular="sandboxtemplate", short=["sandboxtemplate"],
                             cols=[AGE], scale=False),
    "sandboxwarmpools": dict(group=EXT_GROUP, kind="SandboxWarmPool",
                             singular="sandboxwarmpool", short=["swp"],
                             cols=[("Ready", "integer", ".status.readyReplicas"),
                                   ("Desired", "integer", ".spec.replicas"), AGE], scale=True),
}
STATUS_SUBRESOURCE = set(RESOURCES)

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def now_iso(t=None):
    return datetime.fromtimestamp(t if t is not None else time.time(),
                                  timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(s):
    try:
        s = s.replace("Z", "+00:00")
        return datetime.fromisoformat(s).timestamp()
    except (ValueError, AttributeError):
        return None


class ApiError(Exception):
    """A metav1.Status failure."""
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = details
        self.headers = headers or {}

    def status(self):
        s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            s["details"] = self.details
        return s


def not_found(plural, name):
    r = RESOURCES.get(plural, {})
    return ApiError(404, "NotFound", '%s.%s "%s" not found' % (plural, r.get("group", ""), name),
                    {"name": name, "group": r.get("group", ""), "kind": plural})


def conflict(plural, name, msg):
    r = RESOURCES[plural]
    return ApiError(409, "Conflict",
                    'Operation cannot be fulfilled on %s.%s "%s": %s' % (plural, r["group"], name, msg),
                    {"name": name, "group": r["group"], "kind": plural})


def already_exists(plural, name):
    r = RESOURCES[plural]
    return ApiError(409, "AlreadyExists", '%s.%s "%s" already exists' % (plural, r["group"], name),
                    {"name": name, "group": r["group"], "kind": plural})


def invalid(plural, name, field, msg):
    r = RESOURCES[plural]
    return ApiError(422, "Invalid", '%s.%s "%s" is invalid: %s: %s' % (
        r["kind"], r["group"], name, field, msg),
        {"name": name, "group": r["group"], "kind": r["kind"],
         "causes": [{"reason": "FieldValueInvalid", "message": msg, "field": field}]})


def check_schema(plural, name, obj, parts, validation, warnings):
    """The CRD's structural schema on obj (pruned and defaulted in place):
    422 Invalid for violations; unknown fields a 400 with
    fieldValidation=Strict, else warnings (Warn, the default) or nothing
    (Ignore)."""
    errs, unknown = k8s_schema.validate(plural, obj, parts)
    r = RESOURCES[plural]
    if errs:
        msg = "; ".join("%s: %s" % e for e in errs)
        raise ApiError(422, "Invalid", '%s.%s "%s" is invalid: %s' % (r["kind"], r["group"], name, msg),
                       {"name": name, "group": r["group"], "kind": r["kind"],
                        "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f}
                                   for f, m in errs]})
    if unknown and validation == "Strict":
        raise ApiError(400, "BadRequest", "%s in version \"%s\" cannot be handled as a %s: "
                       "strict decoding error: %s" % (r["kind"], STORAGE, r["kind"], ", ".join(
                           'unknown field "%s"' % u for u in unknown)))
    if unknown and validation != "Ignore" and warnings is not None:
        warnings.extend('unknown field "%s"' % u for u in unknown)


# -- selectors --------------------------------------------------------------
_REQ = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(==|=|!=|\s+in\s+|\s+notin\s+)\s*(.*?))?\s*$")


def _split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


def parse_label_selector(sel):
    """A list of predicates over a label map; ApiError 400 for bad syntax."""
    preds = []
    for part in _split_top(sel or ""):
        m = _REQ.match(part)
        if not m:
            raise ApiError(400, "BadRequest", "unable to parse requirement: %r" % part)
        neg, key, op, val = m.group(1), m.group(2), (m.group(3) or "").strip(), m.group(4)
        if neg:
            if op:
                raise ApiError(400, "BadRequest", "unable to parse requirement: %r" % part)
            preds.append(lambda l, k=key: k not in l)
        elif not op:
            preds.append(lambda l, k=key: k in l)
        elif op in ("=", "=="):
            preds.append(lambda l, k=key, v=val: l.get(k) == v)
        elif op == "!=":
            preds.append(lambda l, k=key, v=val: l.get(k) != v)
        else:
            vals = val.strip()
            if not (vals.startswith("(") and vals.endswith(")")):
                raise ApiError(400, "BadRequest", "unable to parse requirement: %r" % part)
            vs = {x.strip() for x in vals[1:-1].split(",") if x.strip()}
            if op == "in":
                preds.append(lambda l, k=key, vs=vs: l.get(k) in vs)
            else:
                preds.append(lambda l, k=key, vs=vs: l.get(k) not in vs)
    return lambda labels: all(p(labels or {}) for p in preds)


def parse_field_selector(sel):
    preds = []
    for part in [p for p in (sel or "").split(",") if p.strip()]:
        m = re.match(r"^\s*([A-Za-z.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m or m.group(1) not in ("metadata.name", "metadata.namespace"):
            raise ApiError(400, "BadRequest",
                           '"%s" is not a known field selector: only "metadata.name", '
                           '"metadata.namespace"' % part.split("=")[0].strip("!"))
        f, op, v = m.group(1).split(".")[1], m.group(2), m.group(3)
        if op == "!=":
            preds.append(lambda o, f=f, v=v: o["metadata"].get(f) != v)
        else:
            preds.append(lambda o, f=f, v=v: o["metadata"].get(f) == v)
    return lambda o: all(p(o) for p in preds)


# -- patches ----------------------------------------------------------------
def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _ptr(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", "invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc, ops):
    """RFC 6902 (add, remove, replace, move, copy, test)."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch is a list of operations")

    def walk(d, parts):
        for p in parts:
            if isinstance(d, list):
                d = d[int(p)]
            else:
                d = d[p]
        return d

    def get(path):
        return walk(doc, _ptr(path))

    def remove(path):
        parts = _ptr(path)
        parent = walk(doc, parts[:-1])
        if isinstance(parent, list):
            return parent.pop(int(parts[-1]))
        return parent.pop(parts[-1])

    def add(path, value):
        nonlocal doc
        parts = _ptr(path)
        if not parts:
            doc = value
            return
        parent = walk(doc, parts[:-1])
        if isinstance(parent, list):
            if parts[-1] == "-":
                parent.append(value)
            else:
                parent.insert(int(parts[-1]), value)
        else:
            parent[parts[-1]] = value

    try:
        for op in ops:
            o, path = op.get("op"), op.get("path", "")
            if o == "add":
                add(path, copy.deepcopy(op["value"]))
            elif o == "remove":
                remove(path)
            elif o == "replace":
                get(path)
                remove(path) if _ptr(path) else None
                add(path, copy.deepcopy(op["value"]))
            elif o == "move":
                add(path, remove(op["from"]))
            elif o == "copy":
                add(path, copy.deepcopy(get(op["from"])))
            elif o == "test":
                if get(path) != op.get("value"):
                    raise ApiError(422, "Invalid", "test operation failed at %s" % path)
            else:
                raise ApiError(400, "BadRequest", "unknown JSON patch operation %r" % o)
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ApiError(422, "Invalid", "the JSON patch does not apply: %s" % e)
    return doc


# -- jsonpath for printer columns --------------------------------------------
_JP = re.compile(r"\.([A-Za-z0-9_-]+)|\[\?\(@\.([A-Za-z0-9_]+)\s*==\s*'([^']*)'\)\]")


def jsonpath(obj, expr):
    cur = [obj]
    for m in _JP.finditer(expr):
        nxt = []
        for c in cur:
            if m.group(1) is not None:
                if isinstance(c, dict) and m.group(1) in c:
                    nxt.append(c[m.group(1)])
            elif isinstance(c, list):
                nxt.extend(x for x in c if isinstance(x, dict) and x.get(m.group(2)) == m.group(3))
        cur = nxt
    return cur[0] if cur else None


def human_age(ts):
    t = parse_iso(ts or "")
    if t is None:
        return "<unknown>"
    s = max(0, int(time.time() - t))
    if s < 120:
        return "%ds" % s
    if s < 3600 * 3:
        return "%dm" % (s // 60)
    if s < 86400 * 2:
        return "%dh" % (s // 3600)
    return "%dd" % (s // 86400)


def table(plural, objs, api_version, include="Metadata", rv=None):
    cols = RESOURCES[plural]["cols"]
    defs = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
             "description": "Name must be unique within a namespace."}]
    defs += [{"name": n, "type": "string" if t == "date" else t, "format": "", "priority": 0,
              "description": p} for n, t, p in cols]
    rows = []
    for o in objs:
        cells = [o["metadata"]["name"]]
        for n, t, p in cols:
            v = jsonpath(o, p)
            if t == "date":
                v = human_age(v) if v else None
            cells.append(v)
        row = {"cells": cells}
        if include == "Object":
            row["object"] = o
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o["metadata"]}
        rows.append(row)
    t = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
         "columnDefinitions": defs, "rows": rows}
    if rv is not None:
        t["metadata"]["resourceVersion"] = str(rv)
    return t


# -- the store --------------------------------------------------------------
class Store:
    def __init__(self, history=2000):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.rv = 100
        self.objs = {}        # (plural, ns, name) -> obj (storage version)
        self.events = []      # (rv, plural, ns, type, obj)
        self.history = history
        self.compacted = 0    # watches from a resourceVersion below this get 410
        self.hooks = []       # fn(type, plural, obj) after every change, lock held

    def _bump(self):
        self.rv += 1
        return self.rv

    def _emit(self, typ, plural, obj):
        self.events.append((int(obj["metadata"]["resourceVersion"]), plural,
                            obj["metadata"].get("namespace"), typ, copy.deepcopy(obj)))
        if len(self.events) > self.history:
            drop = len(self.events) - self.history
            self.compacted = self.events[drop - 1][0] + 1
            del self.events[:drop]
        for h in self.hooks:
            h(typ, plural, obj)
        self.cond.notify_all()

    def compact(self):
        with self.lock:
            self.compacted = self.rv + 1
            self.events = []
            self.cond.notify_all()

    # reads
    def get(self, plural, ns, name):
        with self.lock:
            o = self.objs.get((plural, ns, name))
            if o is None:
                raise not_found(plural, name)
            return copy.deepcopy(o)

    def list(self, plural, ns=None, label=None, field=None):
        lsel = parse_label_selector(label)
        fsel = parse_field_selector(field)
        with self.lock:
            out = [copy.deepcopy(o) for (p, n, _), o in sorted(self.objs.items())
                   if p == plural and (ns is None or n == ns)
                   and lsel(o["metadata"].get("labels")) and fsel(o)]
            return out, self.rv

    def events_after(self, rv):
        i = bisect.bisect_right([e[0] for e in self.events], rv)
        return self.events[i:]

    # writes
    def create(self, plural, ns, obj, dry_run=False, validation="Warn", warnings=None):
        r = RESOURCES[plural]
        with self.lock:
            md = obj.setdefault("metadata", {})
            if not isinstance(md, dict):
                raise ApiError(400, "BadRequest", "metadata must be an object")
            name = md.get("name")
            if not name and md.get("generateName"):
                for _ in range(100):
                    name = md["generateName"] + uuid.uuid4().hex[:5]
                    if (plural, ns, name) not in self.objs:
                        break
            if not name:
                raise invalid(plural, "", "metadata.name", "Required value: name or generateName is required")
            if len(name) > 253 or not DNS_SUBDOMAIN.match(name):
                raise invalid(plural, name, "metadata.name",
                              "Invalid value: %r: a lowercase RFC 1123 subdomain must consist of "
                              "lower case alphanumeric characters, '-' or '.'" % name)
            if md.get("namespace") not in (None, "", ns):
                raise ApiError(400, "BadRequest",
                               "the namespace of the provided object does not match the "
                               "namespace sent on the request")
            if (plural, ns, name) in self.objs:
                raise already_exists(plural, name)
            for k in ("labels", "annotations"):
                if md.get(k) is not None and not isinstance(md[k], dict):
                    raise invalid(plural, name, "metadata." + k, "must be a map")
            md.update(name=name, namespace=ns, uid=str(uuid.uuid4()),
                      creationTimestamp=now_iso(), generation=1)
            for k in ("resourceVersion", "deletionTimestamp", "selfLink"):
                md.pop(k, None)
            obj["apiVersion"] = "%s/%s" % (r["group"], STORAGE)
            obj["kind"] = r["kind"]
            obj.pop("status", None)  # the status subresource is the only way in
            check_schema(plural, name, obj, ("spec",), validation, warnings)
            self._defaults(plural, obj)
            if dry_run:
                md["resourceVersion"] = str(self.rv)
                return copy.deepcopy(obj)
            md["resourceVersion"] = str(self._bump())
            self.objs[(plural, ns, name)] = obj
            self._emit("ADDED", plural, obj)
            return copy.deepcopy(obj)

    @staticmethod
    def _defaults(plural, obj):
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if plural == "sandboxwarmpools":
            spec.setdefault("replicas", 1)
        if plural == "sandboxes":
            spec.setdefault("operatingMode", "Running")

    def update(self, plural, ns, name, new, subresource=None, require_rv=True, dry_run=False,
               validation="Warn", warnings=None):
        """A PUT (or the result of a PATCH): optimistic concurrency on
        metadata.resourceVersion; the main resource keeps the stored status,
        the status subresource keeps everything but the status."""
        with self.lock:
            cur = self.objs.get((plural, ns, name))
            if cur is None:
                raise not_found(plural, name)
            md = new.get("metadata") or {}
            if md.get("name") not in (None, name):
                raise ApiError(400, "BadRequest", "the name of the object (%s) does not match "
                               "the name on the URL (%s)" % (md.get("name"), name))
            want = md.get("resourceVersion")
            if not want and require_rv:
                raise invalid(plural, name, "metadata.resourceVersion",
                              "Invalid value: 0x0: must be specified for an update")
            if want and want != cur["metadata"]["resourceVersion"]:
                raise conflict(plural, name, "the object has been modified; please apply "
                               "your changes to the latest version and try again")
            out = copy.deepcopy(cur)
            if subresource == "status":
                if "status" in new:
                    out["status"] = copy.deepcopy(new["status"])
                else:
                    out.pop("status", None)
            else:
                for k, v in new.items():
                    if k in ("status", "metadata", "apiVersion", "kind"):
                        continue
                    out[k] = copy.deepcopy(v)
                for k in [k for k in out if k not in new and k not in
                          ("status", "metadata", "apiVersion", "kind")]:
                    del out[k]
                keep = {k: cur["metadata"][k] for k in
                        ("name", "namespace", "uid", "creationTimestamp", "generation",
                         "deletionTimestamp") if k in cur["metadata"]}
                om = {k: copy.deepcopy(v) for k, v in md.items()
                      if k not in keep and k != "resourceVersion"}
                om.update(keep)
                out["metadata"] = om
                self._defaults(plural, out)
                if out.get("spec") != cur.get("spec"):
                    out["metadata"]["generation"] = cur["metadata"].get("generation", 1) + 1
            check_schema(plural, name, out, ("status",) if subresource == "status" else ("spec",),
                         validation, warnings)
            if out == cur:
                return copy.deepcopy(cur)  # a no-op write keeps its resourceVersion
            if dry_run:
                return out
            out["metadata"]["resourceVersion"] = str(self._bump())
            self.objs[(plural, ns, name)] = out
            self._emit("MODIFIED", plural, out)
            if out["metadata"].get("deletionTimestamp") and not out["metadata"].get("finalizers"):
                self._remove(plural, ns, name)
            return copy.deepcopy(out)

    def mutate(self, plural, ns, name, fn, subresource=None):
        """Read-modify-write under the lock (the fake controller's writes)."""
        with self.lock:
            cur = self.objs.get((plural, ns, name))
            if cur is None:
                return None
            new = copy.deepcopy(cur)
            fn(new)
            return self.update(plural, ns, name, new, subresource=subresource)

    def delete(self, plural, ns, name, preconditions=None, propagation=None, dry_run=False):
        with self.lock:
            cur = self.objs.get((plural, ns, name))
            if cur is None:
                raise not_found(plural, name)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != cur["metadata"]["uid"]:
                raise conflict(plural, name, "Precondition failed: UID in precondition: %s, "
                               "UID in object meta: %s" % (pre["uid"], cur["metadata"]["uid"]))
            if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
                raise conflict(plural, name, "Precondition failed: ResourceVersion in "
                               "precondition: %s, ResourceVersion in object meta: %s" % (
                                   pre["resourceVersion"], cur["metadata"]["resourceVersion"]))
            if dry_run:
                return copy.deepcopy(cur)
            if cur["metadata"].get("finalizers"):
                if not cur["metadata"].get("deletionTimestamp"):
                    new = copy.deepcopy(cur)
                    new["metadata"]["deletionTimestamp"] = now_iso()
                    new["metadata"]["resourceVersion"] = str(self._bump())
                    self.objs[(plural, ns, name)] = new
                    self._emit("MODIFIED", plural, new)
                    return copy.deepcopy(new)
                return copy.deepcopy(cur)
            return self._remove(plural, ns, name, propagation)

    def _remove(self, plural, ns, name, propagation=None):
        cur = self.objs.pop((plural, ns, name))
        cur["metadata"]["resourceVersion"] = str(self._bump())
        self._emit("DELETED", plural, cur)
        uid = cur["metadata"]["uid"]
        # The garbage collector: dependents named by ownerReferences go too
        # (background propagation), or lose the reference (Orphan).
        for (p, n, nm), o in list(self.objs.items()):
            refs = o["metadata"].get("ownerReferences") or []
            if n == ns and any(r.get("uid") == uid for r in refs):
                if propagation == "Orphan":
                    self.mutate(p, n, nm, lambda x: x["metadata"].__setitem__(
                        "ownerReferences", [r for r in refs if r.get("uid") != uid]))
                elif (p, n, nm) in self.objs:
                    try:
                        self.delete(p, n, nm)
                    except ApiError:
                        pass
        return copy.deepcopy(cur)


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()
