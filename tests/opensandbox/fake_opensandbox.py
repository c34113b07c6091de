#!/usr/bin/env python3
"""fake_opensandbox.py - a stateful fake of OpenSandbox for the tests: the
lifecycle server (/v1), execd (port 44772) and the egress sidecar (port
18080) of every sandbox, all on one loopback port.

Follows /work/shared/specs/opensandbox (sandbox-lifecycle.yml, execd-api.yaml,
egress-api.yaml). Commands really run, as host processes, in a per-sandbox
temporary directory, with the path mapping and mount namespaces of
tests/e2b/fake_e2b.py (the sandbox's /home and /mnt are its own). This is a
test double, not a sandbox: nothing is isolated, and the egress policy is
recorded and reported, not enforced.

Endpoints of a sandbox: direct  127.0.0.1:<port>/sandboxes/<id>/port/<p>
(needs the header the endpoint call returns), or with use_server_proxy
127.0.0.1:<port>/v1/sandboxes/<id>/proxy/<p> (no key, as the real server's
proxy path). A port other than execd's and the sidecar's is proxied to
127.0.0.1:<p>, where a server started by a command of the sandbox listens
(commands share the host's network).

execd as components/execd implements it: background commands
(`"background": true`) write stdout and stderr into one file and answer
`init` then `execution_complete` at once; `GET /command/{id}/logs?cursor=N`
returns that file from byte N on (execd seeks bytes, although the spec
calls the cursor a line index) with the end offset in
EXECD-COMMANDS-TAIL-CURSOR, 400 for an unknown or foreground id;
`DELETE /command?id=` sends SIGTERM to the group, SIGKILL after 3 s, 500
when the command is not running; `POST /files/mv` refuses an existing
destination (utils.go RenameFile); `GET /directories/list` (depth, 400 for
a symlink or a file), `GET /files/search` (glob on names below a path).

Pause and resume (sandbox-lifecycle.yml: Running -> Pausing -> Paused,
Paused -> Resuming -> Running, each transition taking --transition-ms):
pause stops every process of the sandbox with SIGSTOP (as the docker
runtime's freezer: nothing runs, everything is kept), resume continues
them with SIGCONT when the sandbox is Running again. Pause of a sandbox
that is not Running and resume of one that is not Paused are 409
(Conflict: "conflicts with the current state"). A paused sandbox can be
deleted, renewed, looked up and its endpoints resolved; its TTL keeps
running (Running/Paused -> Stopping when the TTL expires). A request to
execd, the sidecar or a port of a sandbox that is Pausing, Paused or
Resuming reaches a frozen process: it is held, unanswered, and served when
the sandbox runs again (as a request to a frozen container); after
--frozen-hold-s (FAKE_OS_FROZEN_HOLD_S, default 30) the connection closes
unanswered. Every command carries SBX_FAKE_SANDBOX_ID (how the fake finds
the processes that left their process group).

Control endpoints (not part of any spec) under /_fake/:
  POST /_fake/faults  [{"match": "/command", "kind": ..., "times": n}]
      kinds: "status" (answer "status" with "body"), "slow" ("delay_ms"),
      "cut" (the /command stream closed after "after" output events; a
      /files/download or /directories/list answer cut in the middle),
      "vanish" (the sandbox disappears before the request is served),
      "stuck" (the next sandbox created stays Pending),
      "stuck_pause" (the next pause stays in Pausing for ever; its
      processes are stopped).
      "match" is a prefix of the path below the endpoint ("/command",
      "/files/upload", "/policy") or of the lifecycle path ("/v1/sandboxes").
  GET  /_fake/stats   {"connections", "sandboxes", "requests": [...]}
  GET  /_fake/egress/<id>   {"policy": ..., "history": [{"policy", "event"}]}
      history holds the policy in force at every command run and every
      policy change.
  POST /_fake/egress/<id>   replace the sidecar's policy (drift from inside)
  POST /_fake/reset   forget faults and the request log
  POST /_fake/execd-restart/<id>   execd of that sandbox forgets every
      command (as a restarted execd): status and logs answer not found
Start: fake_opensandbox.py --port-file F [--api-key K] [--dir D] [--sse-data]
       [--extra-path DIR]   (or FAKE_OS_SSE_DATA=1, FAKE_OS_EXTRA_PATH=DIR)
"""
import argparse
import copy
import json
import os
import queue
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat as pystat
import subprocess
import fnmatch
import http.client
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2b"))
import fake_e2b  # noqa: E402  (namespaces, path mapping helpers)
import fake_http  # noqa: E402  (server, serving; fake_e2b put tests/support on sys.path)

EXECD_PORT = 44772
EGRESS_PORT = 18080
USER = "user"
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
TARGET = re.compile(r"^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$")


def iso(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(s):
    s = s.replace("Z", "+00:00")
    return datetime.fromisoformat(s).timestamp()


class Sandbox(fake_e2b.Sandbox):
    MARK_VAR = "SBX_FAKE_SANDBOX_ID"

    def __init__(self, base, body, stuck):
        super().__init__(base, body["image"]["uri"], body.get("metadata"), 0, False,
                         body.get("env"), "e2b")
        self.id = "os-" + secrets.token_hex(8)
        self.body = body
        t = body.get("timeout")
        self.expires = None if t is None else time.time() + t
        self.state = "Pending"
        self.ready_at = None if stuck else time.time() + 0.05
        self.policy = copy.deepcopy(body.get("networkPolicy")) if body.get("networkPolicy") \
            else {"defaultAction": "allow", "egress": []}
        self.policy.setdefault("defaultAction", "deny")
        self.policy.setdefault("egress", [])
        self.history = [{"event": "create", "policy": copy.deepcopy(self.policy)}]
        self.token = secrets.token_hex(12)
        self.cmds = {}

    def tick(self):
        now = time.time()
        if self.state == "Pending" and self.ready_at and now >= self.ready_at:
            self.state = "Running"
        elif self.state == "Pausing" and self.ready_at and now >= self.ready_at:
            self.state = "Paused"
        elif self.state == "Resuming" and now >= self.ready_at:
            self.state = "Running"
            self.signal_all(signal.SIGCONT)

    def pause(self, stuck):
        # The freezer takes every process where it is, at once.
        self.state, self.ready_at = "Pausing", None if stuck else time.time() + ST.transition_s
        self.signal_all(signal.SIGSTOP)

    def resume(self):
        self.state, self.ready_at = "Resuming", time.time() + ST.transition_s

    def frozen(self):
        self.tick()
        return self.state in ("Pausing", "Paused", "Resuming")

    def view(self):
        self.tick()
        d = {"id": self.id, "image": {"uri": self.template},
             "status": {"state": self.state, "reason": None, "message": None,
                        "lastTransitionAt": iso(time.time())},
             "metadata": self.metadata, "entrypoint": self.body["entrypoint"],
             "createdAt": iso(self.started)}
        if self.expires is not None:
            d["expiresAt"] = iso(self.expires)
        return d

    def note(self, event):
        with self.lock:
            self.history.append({"event": event, "policy": copy.deepcopy(self.policy)})


class State(fake_http.State):
    def __init__(self, args):
        super().__init__(args, "sbx-fake-os-")

    def delete(self, sid):
        with self.lock:
            s = self.sandboxes.pop(sid, None)
        if s:
            s.kill_all()
            shutil.rmtree(s.dir, ignore_errors=True)
        return s

    def reap(self):
        while True:
            time.sleep(0.5)
            now = time.time()
            with self.lock:
                gone = [s.id for s in self.sandboxes.values()
                        if s.expires is not None and s.expires < now]
            for sid in gone:
                self.delete(sid)


ST = None
# Serializes pause and resume requests (a state test and its transition).
TRANSITION = threading.Lock()


class Handler(fake_e2b.Handler):
    def count_connection(self):
        with ST.lock:
            ST.connections += 1

    def do_PATCH(self):
        self.dispatch()

    def log_req(self, body, service):
        with ST.lock:
            ST.requests.append({"service": service, "method": self.command,
                                "path": self.path,
                                "content_type": self.headers.get("Content-Type", ""),
                                "body": body})

    def err(self, code, ecode, message):
        self.send_json(code, {"code": ecode, "message": message})

    def dispatch(self):
        try:
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            if path.startswith("/_fake/"):
                return self.control(path)
            m = re.match(r"^(?:/v1/sandboxes/([^/]+)/proxy|/sandboxes/([^/]+)/port)/(\d+)(/.*)?$",
                         path)
            if m:
                sid = m.group(1) or m.group(2)
                proxied = m.group(1) is not None
                return self.sandbox_service(sid, proxied, int(m.group(3)), m.group(4) or "/",
                                            url)
            self.faults_for(path)
            if self.replied:
                return
            return self.api(url)
        except (ConnectionError, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def faults_for(self, path):
        self.replied = False
        f = ST.take_fault(path, ("slow",))
        if f:
            time.sleep(f.get("delay_ms", 1000) / 1000.0)
        f = ST.take_fault(path, ("status",))
        if f:
            self.body()
            self.replied = True
            self.send_json(f.get("status", 503), f.get("body", {"code": "INTERNAL_ERROR",
                                                               "message": "injected"}))

    def control(self, path):
        if self.common_control(path, ST):
            return
        m = re.match(r"^/_fake/execd-restart/([^/]+)$", path)
        if m:
            self.body()
            with ST.lock:
                sb = ST.sandboxes.get(m.group(1))
            if not sb:
                return self.err(404, "NOT_FOUND", "no such sandbox")
            with sb.lock:
                sb.cmds = {}
            return self.send_json(200, {"ok": True})
        m = re.match(r"^/_fake/egress/([^/]+)$", path)
        if m:
            with ST.lock:
                sb = ST.sandboxes.get(m.group(1))
            if not sb:
                return self.err(404, "NOT_FOUND", "no such sandbox")
            if self.command == "POST":
                sb.policy = json.loads(self.body())
                sb.note("tamper")
            with sb.lock:
                return self.send_json(200, {"policy": sb.policy, "history": sb.history})
        return self.err(404, "NOT_FOUND", "no such control endpoint")

    # ---- lifecycle server ----------------------------------------------
    def api(self, url):
        raw = self.body() if self.command in ("POST", "PATCH", "PUT", "DELETE") else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self.err(400, "INVALID_REQUEST", "body is not JSON")
        self.log_req(body, "lifecycle")
        if ST.api_key is not None and self.headers.get("OPEN-SANDBOX-API-KEY") != ST.api_key:
            return self.err(401, "UNAUTHORIZED", "missing or invalid OPEN-SANDBOX-API-KEY")
        parts = [p for p in url.path.split("/") if p]
        if parts[:1] != ["v1"]:
            return self.err(404, "NOT_FOUND", "no route %s" % url.path)
        parts = parts[1:]
        q = urllib.parse.parse_qs(url.query)
        if parts == ["sandboxes"] and self.command == "POST":
            return self.create(body)
        if parts == ["sandboxes"] and self.command == "GET":
            return self.list(q)
        if len(parts) >= 2 and parts[0] == "sandboxes":
            with ST.lock:
                sb = ST.sandboxes.get(parts[1])
            if sb and ST.take_fault(url.path, ("vanish",)):
                ST.delete(sb.id)
                sb = None
            if not sb:
                return self.err(404, "DOCKER::SANDBOX_NOT_FOUND",
                                "Sandbox %s not found" % parts[1])
            rest = parts[2:]
            sb.tick()
            if not rest and self.command == "GET":
                return self.send_json(200, sb.view())
            if not rest and self.command == "DELETE":
                ST.delete(sb.id)
                return self.send_json(204, None)
            if rest == ["pause"] and self.command == "POST":
                with TRANSITION:
                    if sb.state != "Running":
                        return self.err(409, "SANDBOX::INVALID_STATE",
                                        "sandbox is %s, not Running" % sb.state)
                    sb.pause(ST.take_fault("/v1/sandboxes", ("stuck_pause",)) is not None)
                return self.send_json(202, None)
            if rest == ["resume"] and self.command == "POST":
                with TRANSITION:
                    if sb.state != "Paused":
                        return self.err(409, "SANDBOX::INVALID_STATE",
                                        "sandbox is %s, not Paused" % sb.state)
                    sb.resume()
                return self.send_json(202, None)
            if rest == ["renew-expiration"] and self.command == "POST":
                try:
                    t = parse_iso(body["expiresAt"])
                except (TypeError, KeyError, ValueError):
                    return self.err(400, "INVALID_REQUEST", "expiresAt must be a date-time")
                if t <= time.time():
                    return self.err(400, "INVALID_REQUEST", "expiresAt is in the past")
                sb.expires = t
                return self.send_json(200, {"expiresAt": iso(t)})
            if rest == ["metadata"] and self.command == "PATCH":
                if not isinstance(body, dict):
                    return self.err(400, "INVALID_REQUEST", "want an object")
                for k, v in body.items():
                    e = self.bad_label(k, v)
                    if e:
                        return self.err(400, "INVALID_REQUEST", e)
                for k, v in body.items():
                    if v is None:
                        sb.metadata.pop(k, None)
                    else:
                        sb.metadata[k] = v
                return self.send_json(200, sb.view())
            if len(rest) == 2 and rest[0] == "endpoints" and self.command == "GET":
                port = int(rest[1])
                host = "127.0.0.1:%d" % self.server.server_address[1]
                if q.get("use_server_proxy", ["false"])[0] == "true":
                    return self.send_json(200, {"endpoint": "%s/v1/sandboxes/%s/proxy/%d"
                                                % (host, sb.id, port)})
                return self.send_json(200, {"endpoint": "%s/sandboxes/%s/port/%d"
                                            % (host, sb.id, port),
                                            "headers": {"OpenSandbox-Access": sb.token}})
        return self.err(404, "NOT_FOUND", "no route %s %s" % (self.command, url.path))

    @staticmethod
    def bad_label(k, v):
        if not isinstance(k, str) or not LABEL_NAME.match(k.split("/")[-1]) or \
                len(k.split("/")[-1]) > 63:
            return "metadata key %r is not a valid label key" % k
        if k.startswith("opensandbox.io/"):
            return "metadata key prefix opensandbox.io/ is reserved"
        if v is not None and (not isinstance(v, str) or len(v) > 63 or
                              not LABEL_VALUE.match(v)):
            return "metadata value %r of %s is not a valid label value" % (v, k)
        return None

    def create(self, b):
        if not isinstance(b, dict):
            return self.err(400, "INVALID_REQUEST", "want a CreateSandboxRequest")
        img = b.get("image")
        if not isinstance(img, dict) or not isinstance(img.get("uri"), str) or not img["uri"]:
            return self.err(400, "INVALID_REQUEST", "image.uri is required")
        ep = b.get("entrypoint")
        if not isinstance(ep, list) or not ep or not all(isinstance(x, str) for x in ep):
            return self.err(400, "INVALID_REQUEST", "entrypoint is required with image")
        rl = b.get("resourceLimits")
        if not isinstance(rl, dict) or not all(isinstance(v, str) for v in rl.values()):
            return self.err(400, "INVALID_REQUEST", "resourceLimits is required")
        t = b.get("timeout")
        if t is not None and (not isinstance(t, int) or t < 60):
            return self.err(400, "INVALID_REQUEST", "timeout must be >= 60 or null")
        for k, v in (b.get("metadata") or {}).items():
            e = self.bad_label(k, v)
            if e:
                return self.err(400, "INVALID_REQUEST", e)
        np_ = b.get("networkPolicy")
        if np_ is not None:
            e = self.bad_policy(np_)
            if e:
                return self.err(400, "INVALID_REQUEST", e)
        stuck = ST.take_fault("/v1/sandboxes", ("stuck",)) is not None
        sb = Sandbox(ST.base, b, stuck)
        with ST.lock:
            ST.sandboxes[sb.id] = sb
        v = sb.view()
        out = {k: v[k] for k in ("id", "status", "metadata", "createdAt", "entrypoint")}
        if "expiresAt" in v:
            out["expiresAt"] = v["expiresAt"]
        return self.send_json(202, out)

    @staticmethod
    def bad_rules(rules):
        if not isinstance(rules, list):
            return "egress must be an array"
        for r in rules:
            if not isinstance(r, dict) or set(r) != {"action", "target"} or \
                    r["action"] not in ("allow", "deny") or not isinstance(r["target"], str) \
                    or not TARGET.match(r["target"]):
                return "bad NetworkRule %r" % (r,)
        return None

    def bad_policy(self, p):
        if not isinstance(p, dict) or not set(p) <= {"defaultAction", "egress"}:
            return "networkPolicy must be a NetworkPolicy"
        if p.get("defaultAction", "deny") not in ("allow", "deny"):
            return "defaultAction must be allow or deny"
        return self.bad_rules(p.get("egress", []))

    def list(self, q):
        want = {}
        for m in q.get("metadata", []):
            for k, v in urllib.parse.parse_qsl(m):
                want[k] = v
        states = q.get("state")
        with ST.lock:
            sbs = list(ST.sandboxes.values())
        items = [s.view() for s in sbs
                 if all(s.metadata.get(k) == v for k, v in want.items())]
        if states:
            items = [i for i in items if i["status"]["state"] in states]
        page = int(q.get("page", ["1"])[0])
        size = int(q.get("pageSize", ["20"])[0])
        total = len(items)
        chunk = items[(page - 1) * size:page * size]
        return self.send_json(200, {"items": chunk, "pagination": {
            "page": page, "pageSize": size, "totalItems": total,
            "totalPages": max(1, (total + size - 1) // size),
            "hasNextPage": page * size < total}})

    # ---- in-sandbox services ---------------------------------------------
    def sandbox_service(self, sid, proxied, port, path, url):
        with ST.lock:
            sb = ST.sandboxes.get(sid)
        self.faults_for(path)
        if self.replied:
            return
        if sb and ST.take_fault(path, ("vanish",)):
            ST.delete(sb.id)
            sb = None
        if not sb:
            self.body()
            return self.err(404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox %s not found" % sid)
        sb.tick()
        if not proxied and self.headers.get("OpenSandbox-Access") != sb.token:
            self.body()
            return self.err(401, "UNAUTHORIZED", "endpoint header missing")
        if sb.frozen():
            # A frozen process: the request waits, unanswered, until the
            # sandbox runs again (or is deleted).
            until = time.time() + ST.frozen_hold_s
            while sb.frozen() and time.time() < until and ST.sandboxes.get(sb.id) is sb:
                time.sleep(0.01)
            if ST.sandboxes.get(sb.id) is not sb:
                self.body()
                return self.err(404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox %s not found" % sid)
            if sb.frozen():
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
        if sb.state != "Running":
            self.body()
            return self.err(503, "SANDBOX::NOT_RUNNING", "sandbox is %s" % sb.state)
        if port == EGRESS_PORT:
            return self.egress(sb, path)
        if port == EXECD_PORT:
            return self.execd(sb, path, url)
        return self.proxy(port, path, url)

    def proxy(self, port, path, url):
        """Forward the request to 127.0.0.1:port, where a server of the
        sandbox listens, and relay the answer."""
        raw = self.body()
        hop = {"host", "connection", "transfer-encoding", "content-length", "keep-alive",
               "opensandbox-access"}
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in hop}
        target = path + ("?" + url.query if url.query else "")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request(self.command, target, body=raw or None, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
        except OSError as e:
            return self.err(502, "PROXY_ERROR", "nothing answers on port %d: %s" % (port, e))
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in hop:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def egress(self, sb, path):
        raw = self.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self.err(400, "INVALID_REQUEST", "body is not JSON")
        self.log_req(body, "egress")
        if path != "/policy":
            return self.err(404, "NOT_FOUND", "no route %s" % path)
        mode = "deny_all" if sb.policy["defaultAction"] == "deny" else "allow_all"
        if self.command == "GET":
            return self.send_json(200, {"status": "ok", "mode": mode, "enforcementMode": "dns",
                                        "policy": sb.policy})
        if self.command == "PATCH":
            e = self.bad_rules(body) if isinstance(body, list) and body else "want rules"
            if e:
                return self.err(400, "INVALID_REQUEST", e)
            seen, new = set(), []
            for r in body:  # first incoming rule per target wins
                if r["target"] not in seen:
                    seen.add(r["target"])
                    new.append(r)
            with sb.lock:
                sb.policy["egress"] = new + [r for r in sb.policy["egress"]
                                             if r["target"] not in seen]
            sb.note("patch")
            return self.send_json(200, {"status": "ok", "mode": mode, "enforcementMode": "dns"})
        if self.command == "DELETE":
            if not isinstance(body, list) or not body or \
                    not all(isinstance(t, str) for t in body):
                return self.err(400, "INVALID_REQUEST", "want a list of targets")
            with sb.lock:
                sb.policy["egress"] = [r for r in sb.policy["egress"] if r["target"] not in body]
            sb.note("delete")
            return self.send_json(200, {"status": "ok", "mode": mode, "enforcementMode": "dns"})
        return self.err(405, "INVALID_REQUEST", "method not allowed")

    def execd(self, sb, path, url):
        q = urllib.parse.parse_qs(url.query)
        if path == "/ping":
            self.body()
            return self.send_json(200, None)
        if path == "/command" and self.command == "POST":
            return self.run(sb, path)
        if path == "/files/upload" and self.command == "POST":
            return self.upload(sb)
        if path == "/files/download" and self.command == "GET":
            return self.download(sb, q)
        m = re.match(r"^/command/([^/]+)/logs$", path)
        if m and self.command == "GET":
            self.body()
            return self.logs(sb, m.group(1), q)
        raw = self.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self.err(400, "INVALID_REQUEST", "body is not JSON")
        self.log_req(body, "execd")
        try:
            if path == "/command" and self.command == "DELETE":
                cid = q.get("id", [""])[0]
                with sb.lock:
                    c = sb.cmds.get(cid)
                if not c:
                    return self.err(500, "RUNTIME_ERROR",
                                    "error interruptting code context. no such session")
                if c["popen"].poll() is not None:
                    return self.err(500, "RUNTIME_ERROR", "error interruptting code context. "
                                    "command session %s is not running" % cid)
                self.interrupt(c["popen"])
                return self.send_json(200, None)
            if path.startswith("/command/status/") and self.command == "GET":
                cid = path[len("/command/status/"):]
                with sb.lock:
                    c = sb.cmds.get(cid)
                if not c:
                    return self.err(404, "NOT_FOUND", "command %s not found" % cid)
                rc = c["popen"].poll()
                st = {"id": cid, "content": c["command"], "running": rc is None,
                      "exit_code": None if rc is None else (rc if rc >= 0 else -1),
                      "started_at": iso(c["started"])}
                if rc is not None:
                    st["finished_at"] = iso(c.get("finished") or time.time())
                if c.get("error"):
                    st["error"] = c["error"]
                return self.send_json(200, st)
            if path == "/files/info" and self.command == "GET":
                out = {}
                for p in q.get("path", []):
                    hp = sb.host_path(p)
                    if not os.path.lexists(hp):
                        return self.err(404, "FILE_NOT_FOUND", "%s: no such file" % p)
                    out[p] = self.info(sb, hp)
                return self.send_json(200, out)
            if path == "/files/mv" and self.command == "POST":
                for it in body or []:
                    src, dst = sb.host_path(it["src"]), sb.host_path(it["dest"])
                    if not os.path.exists(src):
                        return self.err(500, "RUNTIME_ERROR",
                                        "source path not found: %s" % it["src"])
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    if os.path.exists(dst):
                        return self.err(500, "RUNTIME_ERROR",
                                        "destination path already exists: %s" % it["dest"])
                    os.rename(src, dst)
                return self.send_json(200, None)
            if path == "/files/permissions" and self.command == "POST":
                for p, perm in (body or {}).items():
                    os.chmod(sb.host_path(p), int(str(perm["mode"]), 8))
                return self.send_json(200, None)
            if path == "/files" and self.command == "DELETE":
                for p in q.get("path", []):
                    # DeleteFile: os.Stat (follows a symlink), missing is
                    # success, a directory an error, else os.Remove.
                    hp = sb.host_path(p)
                    if not os.path.exists(hp):
                        continue
                    if os.path.isdir(hp):
                        return self.err(500, "RUNTIME_ERROR",
                                        "error removing file %s. path is a directory" % p)
                    os.unlink(hp)
                return self.send_json(200, None)
            if path == "/directories" and self.command == "POST":
                for p, perm in (body or {}).items():
                    os.makedirs(sb.host_path(p), mode=int(str(perm.get("mode", 755)), 8),
                                exist_ok=True)
                return self.send_json(200, None)
            if path == "/directories/list" and self.command == "GET":
                return self.list_dir(sb, q)
            if path == "/files/search" and self.command == "GET":
                return self.search(sb, q)
            if path == "/directories" and self.command == "DELETE":
                for p in q.get("path", []):
                    # os.RemoveAll: a symlink or a file is removed itself.
                    hp = sb.host_path(p)
                    if os.path.islink(hp) or (os.path.lexists(hp) and not os.path.isdir(hp)):
                        os.unlink(hp)
                    else:
                        shutil.rmtree(hp, ignore_errors=True)
                return self.send_json(200, None)
        except (KeyError, TypeError, ValueError) as e:
            return self.err(400, "INVALID_REQUEST", "bad request: %s" % e)
        except OSError as e:
            return self.err(500, "FILESYSTEM_ERROR", str(e))
        return self.err(404, "NOT_FOUND", "no route %s %s" % (self.command, path))

    @staticmethod
    def info(sb, hp):
        st = os.lstat(hp)
        t = "symlink" if pystat.S_ISLNK(st.st_mode) else "directory" \
            if pystat.S_ISDIR(st.st_mode) else "file" if pystat.S_ISREG(st.st_mode) else "other"
        return {"path": sb.virtual(hp), "type": t, "size": st.st_size,
                "modified_at": iso(st.st_mtime), "created_at": iso(st.st_ctime),
                "owner": USER, "group": USER, "mode": int(oct(pystat.S_IMODE(st.st_mode))[2:])}

    @staticmethod
    def interrupt(popen):
        """execd's killPid: SIGTERM to the group, SIGKILL after 3 s."""
        try:
            os.killpg(popen.pid, signal.SIGTERM)
        except OSError:
            return

        def later():
            if popen.poll() is None:
                try:
                    os.killpg(popen.pid, signal.SIGKILL)
                except OSError:
                    pass
        threading.Timer(3.0, later).start()

    def logs(self, sb, cid, q):
        self.log_req(None, "execd")
        with sb.lock:
            c = sb.cmds.get(cid)
        if not c:
            return self.err(400, "INVALID_REQUEST_BODY", "command not found: %s" % cid)
        if not c.get("output"):
            return self.err(400, "INVALID_REQUEST_BODY",
                            "command %s is not running in background" % cid)
        try:
            cursor = int(q.get("cursor", ["0"])[0] or 0)
        except ValueError:
            cursor = 0
        with open(c["output"], "rb") as f:
            f.seek(cursor)
            data = f.read()
            end = f.tell()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("EXECD-COMMANDS-TAIL-CURSOR", str(end))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def list_dir(self, sb, q):
        p = q.get("path", [""])[0]
        if not p:
            return self.err(400, "MISSING_QUERY", "missing query parameter 'path'")
        try:
            depth = int(q.get("depth", ["1"])[0])
            if depth < 0:
                raise ValueError
        except ValueError:
            return self.err(400, "INVALID_REQUEST", "invalid query parameter 'depth'")
        hp = sb.host_path(p)
        if not os.path.lexists(hp):
            return self.err(404, "FILE_NOT_FOUND", "file not found. %s" % p)
        if os.path.islink(hp):
            return self.err(400, "INVALID_REQUEST",
                            "path is a symbolic link, refusing to traverse: %s" % p)
        if not os.path.isdir(hp):
            return self.err(400, "INVALID_REQUEST", "path is not a directory: %s" % p)
        out = []

        def walk(d, level):
            for name in sorted(os.listdir(d)):
                e = os.path.join(d, name)
                out.append(self.info(sb, e))
                if level + 1 < depth and os.path.isdir(e) and not os.path.islink(e):
                    walk(e, level + 1)
        if depth:
            walk(hp, 0)
        if ST.take_fault("/directories/list", ("cut",)):
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        return self.send_json(200, out)

    def search(self, sb, q):
        p = q.get("path", [""])[0]
        if not p:
            return self.err(400, "MISSING_QUERY", "missing query parameter 'path'")
        pattern = q.get("pattern", [""])[0] or "**"
        hp = sb.host_path(p)
        if not os.path.exists(hp):
            return self.err(404, "FILE_NOT_FOUND", "file not found. %s" % p)
        out = []
        for d, dirs, files in os.walk(hp):
            dirs.sort()
            for name in sorted(files):
                if pattern == "**" or fnmatch.fnmatchcase(name, pattern):
                    out.append(self.info(sb, os.path.join(d, name)))
        return self.send_json(200, out)

    def download(self, sb, q):
        self.log_req(None, "execd")
        p = q.get("path", [""])[0]
        hp = sb.host_path(p)
        try:
            f = open(hp, "rb")
        except OSError:
            return self.err(404, "FILE_NOT_FOUND", "%s: no such file" % p)
        with f:
            if not pystat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return self.err(404, "FILE_NOT_FOUND", "%s: no such file" % p)
            return self.send_file(f, os.fstat(f.fileno()).st_size)

    def send_file(self, f, total):
        start, size = 0, total
        m = re.match(r"^bytes=(\d*)-(\d*)$", self.headers.get("Range", ""))
        if m and (m.group(1) or m.group(2)):
            if m.group(1):
                start = int(m.group(1))
                end = int(m.group(2)) if m.group(2) else total - 1
            else:
                start, end = max(0, total - int(m.group(2))), total - 1
            end = min(end, total - 1)
            if start > end:
                return self.err(416, "INVALID_RANGE", "range not satisfiable")
            size = end - start + 1
        self.send_response(206 if size != total or start else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        if m and (m.group(1) or m.group(2)):
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, start + size - 1, total))
        self.end_headers()
        cut = ST.take_fault("/files/download", ("cut",))
        if True:
            f.seek(start)
            sent = 0
            while sent < size:
                b = f.read(min(1 << 16, size - sent))
                if not b:
                    break
                if cut and sent + len(b) > size // 2:
                    self.wfile.write(b[:max(0, size // 2 - sent)])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(b)
                sent += len(b)

    def upload(self, sb):
        """multipart/form-data: a metadata part (FileMetadata JSON) then a
        file part, parsed as it streams in and written straight to disk."""
        ctype = self.headers.get("Content-Type", "")
        m = re.search(r'boundary="?([^";]+)"?', ctype)
        if not ctype.startswith("multipart/form-data") or not m:
            self.body()
            return self.err(400, "INVALID_REQUEST", "want multipart/form-data")
        delim = b"\r\n--" + m.group(1).encode()
        buf = b"\r\n"
        chunks = self.body_chunks()
        meta = None
        out = None
        hp = None
        written = 0

        def more():
            nonlocal buf
            try:
                buf += next(chunks)
                return True
            except StopIteration:
                return False
        try:
            while True:  # at a delimiter: read a part header
                while delim not in buf:
                    if not more():
                        raise ValueError("multipart body ends without its final delimiter")
                buf = buf[buf.index(delim) + len(delim):]
                while len(buf) < 2 and more():
                    pass
                if buf.startswith(b"--"):
                    break
                while b"\r\n\r\n" not in buf:
                    if not more():
                        raise ValueError("part headers cut")
                hdr, buf = buf.split(b"\r\n\r\n", 1)
                hdr = hdr.decode("latin-1")
                nm = re.search(r'name="([^"]*)"', hdr)
                name = nm.group(1) if nm else ""
                if name == "metadata":
                    while delim not in buf:
                        if not more():
                            raise ValueError("metadata part cut")
                    meta = json.loads(buf[:buf.index(delim)])
                    buf = buf[buf.index(delim):]
                elif name == "file":
                    if not isinstance(meta, dict) or not isinstance(meta.get("path"), str):
                        raise ValueError("the metadata part must come first, with a path")
                    hp = sb.host_path(meta["path"])
                    os.makedirs(os.path.dirname(hp), exist_ok=True)
                    out = open(hp, "wb")
                    while True:
                        i = buf.find(delim)
                        if i >= 0:
                            out.write(buf[:i])
                            written += i
                            buf = buf[i:]
                            break
                        keep = len(delim)
                        if len(buf) > keep:
                            out.write(buf[:-keep])
                            written += len(buf) - keep
                            buf = buf[-keep:]
                        if not more():
                            raise ValueError("file part cut")
                    out.close()
                    out = None
                    if meta.get("mode") is not None and os.path.isfile(hp):
                        os.chmod(hp, int(str(meta["mode"]), 8))
                else:
                    raise ValueError("unexpected part %r" % name)
        except (ValueError, KeyError) as e:
            if out:
                out.close()
            self.log_req({"metadata": meta, "error": str(e)}, "execd")
            return self.err(400, "INVALID_REQUEST", str(e))
        except ConnectionError:
            if out:
                out.close()
            raise
        self.log_req({"metadata": meta, "bytes": written}, "execd")
        if meta is None or hp is None:
            return self.err(400, "INVALID_REQUEST", "want a metadata part and a file part")
        return self.send_json(200, None)

    def run(self, sb, path):
        raw = self.body()
        try:
            req = json.loads(raw)
            cmd = req["command"]
            if not isinstance(cmd, str) or not cmd:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return self.err(400, "INVALID_REQUEST", "command is required")
        self.log_req(req, "execd")
        sb.note("command")
        cut = ST.take_fault(path, ("cut",))
        env = {"PATH": ST.extra_path + "/usr/local/bin:/usr/bin:/bin",
               "HOME": "/home/" + USER if fake_e2b.NS_WRAP else sb.host_path("/home/" + USER),
               "USER": USER}
        env.update(sb.envs)
        env.update(req.get("envs") or {})
        env[Sandbox.MARK_VAR] = sb.id
        vcwd = os.path.normpath(req.get("cwd") or "/home/" + USER)
        cwd = sb.host_path(vcwd)
        timeout_ms = int(req.get("timeout") or 0)
        framing = "sse" if ST.sse_data else "bare"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def emit(ev):
            ev["timestamp"] = int(time.time() * 1000)
            data = json.dumps(ev, separators=(",", ":")).encode()
            b = (b"data: " + data + b"\n\n") if framing == "sse" else data + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()

        def end():
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        argv = ["/bin/sh", "-c", cmd]
        if not os.path.isdir(cwd):
            emit({"type": "error", "error": {"ename": "CommandExecError",
                                             "evalue": "cwd %s does not exist" % vcwd}})
            return end()
        if fake_e2b.NS_WRAP:
            argv = fake_e2b.NS_WRAP + ["/bin/sh", "-c", fake_e2b.NS_SCRIPT, sb.dir, vcwd, ""] + argv
        if req.get("background"):
            return self.background(sb, cmd, argv, cwd, env, timeout_ms, emit, end)
        popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True, close_fds=True)
        cid = secrets.token_hex(8)
        with sb.lock:
            sb.cmds[cid] = {"popen": popen, "command": cmd, "started": time.time()}
            sb.procs[popen.pid] = fake_e2b.Proc(popen, False)
        events = queue.Queue()

        def reader(stream, name):
            while True:
                b = os.read(stream.fileno(), 32768)
                if not b:
                    break
                events.put((name, b))
            events.put((name, None))
        for s, n in ((popen.stdout, "stdout"), (popen.stderr, "stderr")):
            threading.Thread(target=reader, args=(s, n), daemon=True).start()
        threading.Thread(target=lambda: events.put(("exit", popen.wait())), daemon=True).start()
        deadline = time.time() + timeout_ms / 1000.0 if timeout_ms > 0 else None
        started = time.time()
        try:
            emit({"type": "init", "text": cid})
            open_streams, rc, drain_until, outs = 2, None, None, 0
            last_ping = time.time()
            while open_streams or rc is None:
                wait = 0.5
                if deadline:
                    wait = max(0.0, min(wait, deadline - time.time()))
                if drain_until:
                    wait = max(0.0, min(wait, drain_until - time.time()))
                try:
                    kind, val = events.get(timeout=wait)
                except queue.Empty:
                    if deadline and time.time() >= deadline:
                        deadline = None
                        try:
                            os.killpg(popen.pid, signal.SIGKILL)
                        except OSError:
                            pass
                    elif drain_until and time.time() >= drain_until:
                        break
                    elif time.time() - last_ping >= ST.ping_s:
                        emit({"type": "ping", "text": "pong"})
                        last_ping = time.time()
                    continue
                if kind == "exit":
                    rc = val
                    drain_until = time.time() + 0.2
                elif val is None:
                    open_streams -= 1
                else:
                    outs += 1
                    if cut and outs > cut.get("after", 0):
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        os.killpg(popen.pid, signal.SIGKILL)
                        return
                    # Text, as execd's Go JSON encoder writes it: bytes that
                    # are not UTF-8 become U+FFFD.
                    emit({"type": kind, "text": val.decode("utf-8", "replace")})
            # Reported like execd (Go's ExitCode): -1 when a signal killed the
            # process; the status call names the signal ("signal: killed").
            code = rc if rc >= 0 else -1
            if rc < 0:
                with sb.lock:
                    sb.cmds[cid]["error"] = "signal: " + fake_e2b.SIGNAMES.get(
                        -rc, "signal %d" % -rc)
            if code == 0:
                emit({"type": "execution_complete",
                      "execution_time": int((time.time() - started) * 1000)})
            else:
                emit({"type": "error", "error": {"ename": "CommandExecError",
                                                 "evalue": str(code), "traceback": []}})
            end()
        except (BrokenPipeError, ConnectionResetError, OSError):
            # Closing the stream of a foreground command kills it (command.go:197).
            self.close_connection = True
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except OSError:
                pass


def _background(self, sb, cmd, argv, cwd, env, timeout_ms, emit, end):
    """runBackgroundCommand: stdout and stderr into one file of execd's
    (os.TempDir()/<id>.output), stdin /dev/null, a process group of its
    own, SIGKILL to the group at the timeout; the stream ends at once."""
    cid = secrets.token_hex(16)
    logdir = os.path.join(sb.dir, ".execd-tmp")
    os.makedirs(logdir, exist_ok=True)
    outp = os.path.join(logdir, cid + ".output")
    with open(outp, "wb") as f:
        popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=f, stderr=f, start_new_session=True, close_fds=True)
    c = {"popen": popen, "command": cmd, "started": time.time(), "output": outp}
    with sb.lock:
        sb.cmds[cid] = c
        sb.procs[popen.pid] = fake_e2b.Proc(popen, False)

    def wait():
        rc = popen.wait()
        c["finished"] = time.time()
        if rc < 0:
            c["error"] = "signal: " + fake_e2b.SIGNAMES.get(-rc, "signal %d" % -rc)
        elif rc > 0:
            c["error"] = "exit status %d" % rc
    threading.Thread(target=wait, daemon=True).start()
    if timeout_ms > 0:
        def kill():
            if popen.poll() is None:
                try:
                    os.killpg(popen.pid, signal.SIGKILL)
                except OSError:
                    pass
        t = threading.Timer(timeout_ms / 1000.0, kill)
        t.daemon = True
        t.start()
    try:
        emit({"type": "init", "text": cid})
        emit({"type": "execution_complete", "execution_time": 0})
        end()
    except (BrokenPipeError, ConnectionResetError, OSError):
        self.close_connection = True


Handler.background = _background


def main():
    global ST
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--api-key")
    ap.add_argument("--dir")
    ap.add_argument("--sse-data", action="store_true",
                    default=os.environ.get("FAKE_OS_SSE_DATA") == "1",
                    help="frame events as 'data: <json>' (the SDK accepts both)")
    ap.add_argument("--ping-s", type=float, default=3.0)
    ap.add_argument("--extra-path", default=os.environ.get("FAKE_OS_EXTRA_PATH", ""),
                    help="a directory put first in the PATH of commands (stub tools)")
    ap.add_argument("--no-namespaces", action="store_true")
    ap.add_argument("--transition-ms", type=float,
                    default=float(os.environ.get("FAKE_OS_TRANSITION_MS", "50")),
                    help="how long Pausing and Resuming last")
    ap.add_argument("--frozen-hold-s", type=float,
                    default=float(os.environ.get("FAKE_OS_FROZEN_HOLD_S", "30")),
                    help="how long a request to a paused sandbox is held")
    args = ap.parse_args()
    ST = State(args)
    ST.sse_data = args.sse_data
    ST.ping_s = args.ping_s
    ST.transition_s = args.transition_ms / 1000.0
    ST.frozen_hold_s = args.frozen_hold_s
    ST.extra_path = args.extra_path + ":" if args.extra_path else ""
    fake_e2b.ST = ST
    if not args.no_namespaces:
        fake_e2b.probe_namespaces()
    srv = fake_http.Server(("127.0.0.1", args.port), Handler)
    threading.Thread(target=ST.reap, daemon=True).start()
    fake_http.serve(srv, ST, args.port_file)


if __name__ == "__main__":
    main()
