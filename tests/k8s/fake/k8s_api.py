"""k8s_api.py - the HTTP side of the fake Kubernetes API server: discovery,
the REST verbs of the four resources (and their status subresource),
watches, bearer-token authentication, Tables for kubectl, the fault
injection and the /_fake/ control endpoints."""
import base64
import json
import os
import secrets
import socket
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import k8s_store as ks
from k8s_store import ApiError, RESOURCES, VERSIONS

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


class Faults:
    """Injected failures: a list of rules consumed as they fire.
    Rule fields: kind ("status", "conflict", "drop_watch", "slow",
    "never_ready", "reset"), verb (a Kubernetes verb or "*"), resource (a
    plural, "router", or "*"), name (optional), times (default 1, -1 = for
    ever), and per kind: status/retry_after/message, after_events/after_ms,
    delay_ms, after_messages/after_bytes."""
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []

    def add(self, rules):
        if isinstance(rules, dict):
            rules = [rules]
        with self.lock:
            for r in rules:
                r = dict(r)
                r.setdefault("times", 1)
                r.setdefault("verb", "*")
                r.setdefault("resource", "*")
                self.rules.append(r)

    def clear(self):
        with self.lock:
            self.rules = []

    def take(self, kinds, verb, resource, name=None, exact=False):
        with self.lock:
            for r in self.rules:
                if r["kind"] in kinds and r["verb"] in ("*", verb) \
                        and (r["resource"] == resource or (r["resource"] == "*" and not exact)) \
                        and r.get("name") in (None, "*", name) and r["times"] != 0:
                    if r["times"] > 0:
                        r["times"] -= 1
                    return dict(r)
        return None

    def snapshot(self):
        with self.lock:
            return [dict(r) for r in self.rules]


class Api:
    def __init__(self, store, tokens, faults):
        self.store = store
        self.tokens = tokens        # {"token": expiry epoch or None}
        self.faults = faults
        self.log = []
        self.log_lock = threading.Lock()
        self.controller = None
        self.field_validation = "Warn"  # for requests that name none
        self.token_file = None
        self.absent = set()         # plurals whose CRD is not installed (--no-crd)

    def record(self, **e):
        with self.log_lock:
            self.log.append(e)
            if len(self.log) > 5000:
                del self.log[:1000]


def discovery_group(group):
    vs = [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in VERSIONS]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": vs,
            "preferredVersion": vs[0]}


def resource_list(group, version, absent=()):
    res = []
    for plural, r in RESOURCES.items():
        if r["group"] != group or plural in absent:
            continue
        res.append({"name": plural, "singularName": r["singular"], "namespaced": True,
                    "kind": r["kind"], "shortNames": r["short"], "categories": [],
                    "verbs": list(VERBS), "storageVersionHash": plural[:8]})
        res.append({"name": plural + "/status", "singularName": "", "namespaced": True,
                    "kind": r["kind"], "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "%s/%s" % (group, version),
            "resources": res}


_V2 = None


def openapi_v2_protobuf():
    """An OpenAPI v2 document with no paths, in the protobuf encoding kubectl
    before 1.27 fetches (gnostic's openapi.v2.Document: swagger = 1,
    info = 2 {title = 1, version = 2}, paths = 8). With no schema for a
    custom resource, kubectl validates nothing client-side, as for a CRD
    that publishes none."""
    global _V2
    if _V2 is None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        f = descriptor_pb2.FileDescriptorProto(name="fake_openapiv2.proto", package="openapi.v2",
                                               syntax="proto3")
        info = f.message_type.add(name="Info")
        for n, i in (("title", 1), ("version", 2)):
            info.field.add(name=n, number=i, type=9, label=1)
        f.message_type.add(name="Paths")
        doc = f.message_type.add(name="Document")
        doc.field.add(name="swagger", number=1, type=9, label=1)
        doc.field.add(name="info", number=2, type=11, label=1, type_name=".openapi.v2.Info")
        doc.field.add(name="paths", number=8, type=11, label=1, type_name=".openapi.v2.Paths")
        pool = descriptor_pool.DescriptorPool()
        pool.Add(f)
        cls = message_factory.MessageFactory(pool).GetPrototype(
            pool.FindMessageTypeByName("openapi.v2.Document"))
        d = cls(swagger="2.0")
        d.info.title = "Kubernetes (fake)"
        d.info.version = "v1.32.0"
        d.paths.SetInParent()
        _V2 = d.SerializeToString()
    return _V2


def openapi_v3(rest):
    """Just enough OpenAPI v3 for kubectl: the root lists one document per
    group version; each document declares the resources' operations with
    their x-kubernetes-group-version-kind and the fieldValidation parameter
    (which tells kubectl that the server validates fields itself, so it
    needs no client-side schema)."""
    gvs = ["apis/%s/%s" % (g, v) for g in (ks.SANDBOX_GROUP, ks.EXT_GROUP) for v in VERSIONS]
    if not rest:
        return {"paths": {gv: {"serverRelativeURL": "/openapi/v3/%s?hash=fake1" % gv}
                          for gv in gvs}}
    gv = "/".join(rest)
    if gv not in gvs:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    _, group, version = gv.split("/")
    params = [{"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
              for n in ("dryRun", "fieldManager", "fieldValidation")]
    paths, schemas = {}, {}
    for plural, r in RESOURCES.items():
        if r["group"] != group:
            continue
        gvk = {"group": group, "version": version, "kind": r["kind"]}
        ref = "%s.%s.%s" % (".".join(reversed(group.split("."))), version, r["kind"])
        schemas[ref] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "x-kubernetes-group-version-kind": [gvk]}
        body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/" + ref}}}}
        op = {"parameters": params, "x-kubernetes-group-version-kind": gvk,
              "responses": {"200": body}}
        base = "/apis/%s/%s/namespaces/{namespace}/%s" % (group, version, plural)
        paths[base] = {"get": dict(op, **{"x-kubernetes-action": "list"}),
                       "post": dict(op, requestBody=body, **{"x-kubernetes-action": "post"})}
        for sub in ("/{name}", "/{name}/status"):
            paths[base + sub] = {k: dict(op, requestBody=body, **{"x-kubernetes-action": a})
                                 for k, a in (("get", "get"), ("put", "put"),
                                              ("patch", "patch"), ("delete", "delete"))}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (fake)", "version": "v1.32.0"},
            "paths": paths, "components": {"schemas": schemas}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    api = None  # set by serve()

    def log_message(self, *a):
        pass

    # -- plumbing -----------------------------------------------------------
    def _send(self, code, obj, headers=None):
        body = ks.dumps(obj)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self._code = code

    def _fail(self, e):
        self._send(e.code, e.status(), e.headers)

    def _body(self):
        self._body_read = True
        n = int(self.headers.get("Content-Length") or 0)
        if n > 8 << 20:
            raise ApiError(413, "RequestEntityTooLarge", "request entity too large")
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(parts)
        return raw

    def _json_body(self):
        raw = self._body()
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype in ("application/yaml", "application/vnd.kubernetes.protobuf"):
            raise ApiError(415, "UnsupportedMediaType",
                           "the fake API server accepts JSON bodies only (got %s)" % ctype)
        try:
            return json.loads(raw or b"null")
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the body is not JSON: %s" % e)

    def _auth(self):
        h = self.headers.get("Authorization") or ""
        tok = h[7:].strip() if h.startswith("Bearer ") else None
        exp = self.api.tokens.get(tok, False) if tok else False
        if exp is False or (exp is not None and time.time() >= exp):
            raise ApiError(401, "Unauthorized", "Unauthorized")

    # -- dispatch -----------------------------------------------------------
    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _dispatch(self, method):
        u = urllib.parse.urlsplit(self.path)
        self.q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        parts = [urllib.parse.unquote(p) for p in u.path.split("/") if p]
        self._code = 0
        self._body_read = False
        self._warnings = []
        verb, plural, name = method.lower(), None, None
        self._seen = None  # (verb, plural, name) once _resource knows them
        t0 = time.time()
        try:
            if parts and parts[0] == "_fake":
                return self._control(method, parts[1:])
            if u.path in ("/healthz", "/livez", "/readyz"):
                body = b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(body)
                return
            self._auth()
            verb, plural, name = self._route(method, parts)
        except ApiError as e:
            if self._seen:  # a refused or fault-answered request: log its verb
                verb, plural, name = self._seen
            if not getattr(self, "_body_read", False):
                # Read what the client sent: closing on unread bytes would
                # reset the connection and lose this answer.
                try:
                    self._body()
                except (ApiError, ValueError, OSError):
                    self.close_connection = True
            self._fail(e)
        except OSError:  # the client went away (a reset, an SSL EOF)
            self.close_connection = True
        finally:
            if parts[:1] != ["_fake"]:
                self.api.record(method=method, path=u.path, query=u.query, verb=verb,
                                resource=plural, name=name, code=self._code,
                                ms=int((time.time() - t0) * 1000), warnings=self._warnings)

    def _route(self, method, parts):
        if parts == ["version"]:
            self._send(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake",
                             "platform": "linux/amd64"})
            return "get", None, None
        if parts == ["api"]:
            self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                             "serverAddressByClientCIDRs": [
                                 {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
            return "get", None, None
        if parts == ["api", "v1"]:
            self._send(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "namespaces", "singularName": "namespace", "namespaced": False,
                 "kind": "Namespace", "verbs": ["get", "list"], "shortNames": ["ns"]}]})
            return "get", None, None
        if parts[:3] == ["api", "v1", "namespaces"] and method == "GET":
            if len(parts) == 4:
                self._send(200, self._namespace(parts[3]))
            elif len(parts) == 3:
                self._send(200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {},
                                 "items": [self._namespace("default")]})
            else:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return "get", "namespaces", None
        if parts == ["openapi", "v2"]:
            body = openapi_v2_protobuf()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self._code = 200
            return "get", None, None
        if parts[:2] == ["openapi", "v3"]:
            self._send(200, openapi_v3(parts[2:]))
            return "get", None, None
        served = [g for g in (ks.SANDBOX_GROUP, ks.EXT_GROUP) if self._served(g)]
        if parts == ["apis"]:
            self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                discovery_group(g) for g in served]})
            return "get", None, None
        if len(parts) >= 2 and parts[0] == "apis" and parts[1] in served:
            group = parts[1]
            if len(parts) == 2:
                self._send(200, discovery_group(group))
                return "get", None, None
            version = parts[2]
            if version not in VERSIONS:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if len(parts) == 3:
                self._send(200, resource_list(group, version, self.api.absent))
                return "get", None, None
            rest = parts[3:]
            ns = None
            if rest[0] == "namespaces" and len(rest) >= 3:
                ns, rest = rest[1], rest[2:]
                if not ks.DNS_LABEL.match(ns):
                    raise ApiError(404, "NotFound", "the server could not find the requested resource")
            plural = rest[0]
            if (plural not in RESOURCES or RESOURCES[plural]["group"] != group or len(rest) > 3
                    or plural in self.api.absent):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            name = rest[1] if len(rest) > 1 else None
            sub = rest[2] if len(rest) > 2 else None
            if sub not in (None, "status"):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self._resource(method, group, version, ns, plural, name, sub)
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _served(self, group):
        """A group is served while one of its CRDs is installed (--no-crd)."""
        return any(r["group"] == group and p not in self.api.absent
                   for p, r in RESOURCES.items())

    @staticmethod
    def _namespace(name):
        return {"kind": "Namespace", "apiVersion": "v1",
                "metadata": {"name": name, "uid": "ns-" + name, "resourceVersion": "1",
                             "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

    def _out(self, obj, group, version):
        obj["apiVersion"] = "%s/%s" % (group, version)
        return obj

    def _wants_table(self):
        return "as=Table" in (self.headers.get("Accept") or "")

    def _resource(self, method, group, version, ns, plural, name, sub):
        st = self.api.store
        dry = self.q.get("dryRun") == "All"
        if method == "GET" and name is None:
            verb = "watch" if self.q.get("watch") in ("1", "true", "True") else "list"
        else:
            verb = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                    "DELETE": "delete"}[method]
            if name is None and method != "POST":
                if method == "DELETE":
                    verb = "deletecollection"
                else:
                    raise ApiError(405, "MethodNotAllowed", "the server does not allow this "
                                   "method on the requested resource")
        if method == "POST" and name is not None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if ns is None and verb not in ("list", "watch"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        self._seen = (verb, plural, name)
        self._inject(verb, plural, name)
        if verb == "watch":
            self._watch(group, version, ns, plural)
            return verb, plural, name
        if verb == "list":
            items, rv = st.list(plural, ns, self.q.get("labelSelector"), self.q.get("fieldSelector"))
            items, cont = self._page(items, rv)
            if self._wants_table():
                t = ks.table(plural, [self._out(o, group, version) for o in items], version,
                             self.q.get("includeObject", "Metadata"), rv)
                if cont:
                    t["metadata"]["continue"] = cont
                self._send(200, t)
            else:
                md = {"resourceVersion": str(rv)}
                if cont:
                    md["continue"] = cont
                self._send(200, {"apiVersion": "%s/%s" % (group, version),
                                 "kind": RESOURCES[plural]["kind"] + "List", "metadata": md,
                                 "items": [self._out(o, group, version) for o in items]})
            return verb, plural, name
        if verb == "get":
            o = self._out(st.get(plural, ns, name), group, version)
            if self._wants_table() and sub is None:
                self._send(200, ks.table(plural, [o], version, self.q.get("includeObject", "Metadata")))
            else:
                self._send(200, o)
            return verb, plural, name
        if verb == "create":
            body = self._json_body()
            self._check_kind(body, group, plural)
            self._send(201, self._out(st.create(plural, ns, body, dry, self._validation(),
                                                self._warnings), group, version), self._warn_headers())
            return verb, plural, body.get("metadata", {}).get("name")
        if verb == "update":
            body = self._json_body()
            self._check_kind(body, group, plural)
            self._send(200, self._out(st.update(plural, ns, name, body, sub, dry_run=dry,
                                                validation=self._validation(),
                                                warnings=self._warnings),
                                      group, version), self._warn_headers())
            return verb, plural, name
        if verb == "patch":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            patch = self._json_body()
            cur = st.get(plural, ns, name)
            if ctype == "application/merge-patch+json":
                new = ks.merge_patch(cur, patch)
            elif ctype == "application/json-patch+json":
                new = ks.json_patch(cur, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted "
                               "media types include: application/json-patch+json, "
                               "application/merge-patch+json (strategic merge and apply patches "
                               "are not supported for custom resources)")
            if not isinstance(new, dict):
                raise ApiError(422, "Invalid", "the patch does not yield an object")
            # A patch that names no resourceVersion applies to the current one.
            want = (patch.get("metadata") or {}).get("resourceVersion") if isinstance(patch, dict) else None
            new.setdefault("metadata", {})["resourceVersion"] = want or cur["metadata"]["resourceVersion"]
            if not want:
                # no precondition: retry against the latest version
                try:
                    out = st.update(plural, ns, name, new, sub, dry_run=dry,
                                    validation=self._validation(), warnings=self._warnings)
                except ApiError as e:
                    if e.code != 409:
                        raise
                    cur = st.get(plural, ns, name)
                    new = ks.merge_patch(cur, patch) if ctype.startswith("application/merge") \
                        else ks.json_patch(cur, patch)
                    out = st.update(plural, ns, name, new, sub, dry_run=dry,
                                    validation=self._validation(), warnings=self._warnings)
            else:
                out = st.update(plural, ns, name, new, sub, dry_run=dry,
                                validation=self._validation(), warnings=self._warnings)
            self._send(200, self._out(out, group, version), self._warn_headers())
            return verb, plural, name
        if verb == "delete":
            opts = self._json_body() if int(self.headers.get("Content-Length") or 0) else {}
            opts = opts or {}
            prop = opts.get("propagationPolicy") or self.q.get("propagationPolicy")
            if opts.get("orphanDependents") is True:
                prop = "Orphan"
            out = st.delete(plural, ns, name, opts.get("preconditions"), prop,
                            dry or opts.get("dryRun") == ["All"])
            self._send(200, self._out(out, group, version))
            return verb, plural, name
        if verb == "deletecollection":
            items, _ = st.list(plural, ns, self.q.get("labelSelector"), self.q.get("fieldSelector"))
            for o in items:
                try:
                    st.delete(plural, ns, o["metadata"]["name"])
                except ApiError:
                    pass
            self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
            return verb, plural, name

    def _validation(self):
        v = self.q.get("fieldValidation", self.api.field_validation)
        if v not in ("Ignore", "Warn", "Strict"):
            raise ApiError(400, "BadRequest", "fieldValidation must be one of Ignore, Warn, Strict")
        return v

    def _warn_headers(self):
        if not self._warnings:
            return None
        return {"Warning": ", ".join('299 - "%s"' % w.replace('"', '\\"') for w in self._warnings)}

    def _check_kind(self, body, group, plural):
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the body must be a JSON object")
        kind = body.get("kind")
        av = body.get("apiVersion")
        r = RESOURCES[plural]
        if kind not in (None, r["kind"]) or (av is not None and av.split("/")[0] != group):
            raise ApiError(400, "BadRequest", "the API version in the data (%s) does not match "
                           "the expected API version (%s/%s) or kind %s" % (
                               av, group, VERSIONS[0], r["kind"]))

    def _page(self, items, rv):
        limit = int(self.q.get("limit") or 0)
        start = 0
        if self.q.get("continue"):
            try:
                c = json.loads(base64.urlsafe_b64decode(self.q["continue"] + "=="))
                start, crv = int(c["start"]), int(c["rv"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "BadRequest", "invalid continue token")
            if crv < self.api.store.compacted:
                raise ApiError(410, "Expired", "The provided continue parameter is too old "
                               "to display a consistent list result.")
        if limit <= 0:
            return items[start:], None
        page = items[start:start + limit]
        if start + limit < len(items):
            tok = base64.urlsafe_b64encode(json.dumps({"start": start + limit, "rv": rv})
                                           .encode()).decode().rstrip("=")
            return page, tok
        return page, None

    def _inject(self, verb, plural, name):
        f = self.api.faults.take(("slow",), verb, plural, name)
        if f:
            time.sleep(f.get("delay_ms", 1000) / 1000.0)
        f = self.api.faults.take(("status", "conflict"), verb, plural, name)
        if not f:
            return
        if f["kind"] == "conflict":
            if verb == "create":
                raise ks.already_exists(plural, name or "(generated)")
            raise ks.conflict(plural, name or "", "the object has been modified; please apply "
                              "your changes to the latest version and try again")
        code = int(f.get("status", 500))
        reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                  504: "Timeout", 401: "Unauthorized", 403: "Forbidden"}.get(code, "InternalError")
        hdr = {}
        if code == 429 or f.get("retry_after") is not None:
            hdr["Retry-After"] = str(f.get("retry_after", 1))
        raise ApiError(code, reason, f.get("message", "injected fault: %d" % code),
                       {"retryAfterSeconds": int(f.get("retry_after", 1))} if code == 429 else None,
                       hdr)

    # -- watch --------------------------------------------------------------
    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, group, version, ns, plural):
        st = self.api.store
        lsel = ks.parse_label_selector(self.q.get("labelSelector"))
        fsel = ks.parse_field_selector(self.q.get("fieldSelector"))
        timeout = float(self.q.get("timeoutSeconds") or 1800)
        bookmarks = self.q.get("allowWatchBookmarks") in ("true", "1")
        table = self._wants_table()
        include = self.q.get("includeObject", "Metadata")
        rv_param = self.q.get("resourceVersion", "")
        fname = None
        for part in (self.q.get("fieldSelector") or "").split(","):
            if part.startswith("metadata.name="):
                fname = part.split("=", 1)[1]
        drop = self.api.faults.take(("drop_watch",), "watch", plural, fname)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self._code = 200
        deadline = time.time() + timeout
        sent = 0
        started = time.time()

        def visible(o):
            return (ns is None or o["metadata"].get("namespace") == ns) and \
                lsel(o["metadata"].get("labels")) and fsel(o)

        def send(typ, o):
            nonlocal sent
            o = self._out(o, group, version)
            if table and typ in ("ADDED", "MODIFIED", "DELETED"):
                o = ks.table(plural, [o], version, include)
                o["metadata"]["resourceVersion"] = o["rows"][0].get("object", {}).get(
                    "metadata", {}).get("resourceVersion", "")
            self._chunk(ks.dumps({"type": typ, "object": o}) + b"\n")
            sent += 1

        try:
            with st.lock:
                if rv_param in ("", "0"):
                    # "Start at most recent": the current state as ADDED events.
                    items, last = st.list(plural, ns)
                    initial = [o for o in items if visible(o)]
                else:
                    try:
                        last = int(rv_param)
                    except ValueError:
                        raise ApiError(400, "BadRequest", "invalid resourceVersion %r" % rv_param)
                    initial = []
                    if last < st.compacted - 1 or last > st.rv:
                        gone = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "reason": "Expired", "code": 410,
                                "message": "too old resource version: %d (%d)" % (last, st.compacted)}
                        self._chunk(ks.dumps({"type": "ERROR", "object": gone}) + b"\n")
                        self.wfile.write(b"0\r\n\r\n")
                        return
            for o in initial:
                send("ADDED", o)
            last_bookmark = time.time()
            while time.time() < deadline:
                if drop and (sent >= drop.get("after_events", 1 << 30) or
                             (time.time() - started) * 1000 >= drop.get("after_ms", 1 << 30)):
                    if drop.get("clean"):
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                    else:
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                   struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                with st.lock:
                    if last < st.compacted - 1:
                        gone = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "reason": "Expired", "code": 410,
                                "message": "too old resource version: %d (%d)" % (last, st.compacted)}
                        evs = None
                    else:
                        evs = st.events_after(last)
                        if not evs:
                            st.cond.wait(0.2)
                            evs = st.events_after(last)
                if evs is None:
                    self._chunk(ks.dumps({"type": "ERROR", "object": gone}) + b"\n")
                    break
                for rv, p, n, typ, o in evs:
                    last = rv
                    if p == plural and visible(o):
                        send(typ, o)
                if bookmarks and time.time() - last_bookmark > 1.0:
                    last_bookmark = time.time()
                    self._chunk(ks.dumps({"type": "BOOKMARK", "object": {
                        "kind": RESOURCES[plural]["kind"], "apiVersion": "%s/%s" % (group, version),
                        "metadata": {"resourceVersion": str(last)}}}) + b"\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    # -- control ------------------------------------------------------------
    def _control(self, method, parts):
        api = self.api
        body = self._json_body() if method in ("POST", "PUT") else None
        if parts == ["faults"] and method == "POST":
            api.faults.add(body or [])
            return self._send(200, {"faults": api.faults.snapshot()})
        if parts == ["faults"]:
            return self._send(200, {"faults": api.faults.snapshot()})
        if parts == ["reset"]:
            api.faults.clear()
            with api.log_lock:
                api.log = []
            return self._send(200, {})
        if parts == ["token"] and method == "POST":
            # {"expire": true} expires every token; {"token": T, "ttl": s} adds one
            b = body or {}
            if b.get("expire"):
                for t in list(api.tokens):
                    api.tokens[t] = time.time() - 1
            if b.get("token"):
                api.tokens[b["token"]] = (time.time() + b["ttl"]) if b.get("ttl") else None
            if b.get("rotate"):
                # kubelet's rotation: a new token in the service account's
                # token file; the old ones stay valid for "grace" seconds
                new = secrets.token_hex(16)
                for t in list(api.tokens):
                    api.tokens[t] = time.time() + float(b.get("grace", 0))
                api.tokens[new] = None
                if api.token_file:
                    with open(api.token_file + ".tmp", "w") as f:
                        f.write(new)
                    os.rename(api.token_file + ".tmp", api.token_file)
                return self._send(200, {"token": new})
            return self._send(200, {"tokens": len(api.tokens)})
        if parts == ["compact"]:
            api.store.compact()
            return self._send(200, {"compacted": api.store.compacted})
        if parts == ["stats"]:
            with api.log_lock:
                log = list(api.log)
            c = api.controller
            return self._send(200, {"resourceVersion": api.store.rv, "requests": log,
                                    "controller": c.stats() if c else {}})
        raise ApiError(404, "NotFound", "no such control endpoint")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    ssl_ctx = None

    def finish_request(self, request, client_address):
        # The TLS handshake in the connection's own thread: a client that
        # stalls in it holds up no one else.
        if self.ssl_ctx is not None:
            request.settimeout(30)
            try:
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
            except OSError:
                return
            request.settimeout(None)
        self.RequestHandlerClass(request, client_address, self)


def serve(api, host="127.0.0.1", port=0, tls=None):
    handler = type("BoundHandler", (Handler,), {"api": api})
    srv = Server((host, port), handler)
    if tls:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls[0], tls[1])
        ctx.set_alpn_protocols(["http/1.1"])
        srv.ssl_ctx = ctx
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv
