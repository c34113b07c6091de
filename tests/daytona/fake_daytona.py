#!/usr/bin/env python3
"""fake_daytona.py - a stateful fake of the Daytona API and of the toolbox
daemon inside each sandbox, for the tests.

Follows the subset of /work/shared/specs/daytona (openapi.yaml for the API,
swagger.yaml for the toolbox) that the daytona provider and the official
TypeScript SDK use. The toolbox is served at <base>/toolbox/<sandbox id>/...
and every Sandbox answer carries toolboxProxyUrl = <base>/toolbox, as the
real proxy's. Errors are {statusCode, error, message, path, timestamp}
(apps/api all-exceptions.filter.ts); a missing sandbox is 404 "Sandbox with
ID or name <x> not found".

Commands really run, as host processes, in a per-sandbox temporary
directory: the sandbox's /home, /mnt, /tmp and /workspace map into it. Each
command gets a private mount namespace in which those directories are bound
over the real ones, and (when the fake runs as root) runs as an unprivileged
uid, like the sandbox user "daytona"; files the toolbox creates belong to
that uid. This is a test double, not a sandbox: nothing is isolated.

Lifecycle: a new sandbox is "creating" for CREATE_DELAY seconds, then
"started"; stop/pause kill its processes and pass through "stopping" /
"pausing" for a moment to "stopped" / "paused" (the toolbox refuses every
call meanwhile: 400 "Sandbox is not running"); start brings it back
through "starting" (a "stopping" one is refused with 400, as mid-transition); DELETE makes it "destroying" for a moment, then it is gone.

Control endpoints (not part of any spec) under /_fake/:
  POST /_fake/faults  [{"match": "<path prefix>", "kind": ..., "times": n,
                        "method": only requests of this method,
                        "query": only requests whose decoded query has this}]
      kinds: "status" (answer "status" with "body"), "slow" ("delay_ms"
      before answering), "cut" (a download of a file of at least "min_size"
      bytes closes the connection after half the body), "vanish" (the
      sandbox disappears before the request is served), "truncate" (a JSON
      answer closes the connection after half its body), "stuck" (a sandbox
      created while it is armed stays in "pending_build" forever),
      "stuck_stop" (POST /sandbox/{id}/stop leaves it "stopping" forever).
  Toolbox faults match "/toolbox/<path below the sandbox>", e.g.
  "/toolbox/process/session"; API faults the request path ("/api/sandbox").
  POST /_fake/state   {"id": ..., "state": "stopped"|"paused"}
  GET  /_fake/stats   {"connections": n, "sandboxes": n, "requests": [...]}
  POST /_fake/reset   forget faults and the request log
With SBX_FAKE_DAYTONA_LOG=FILE in its environment the fake also appends
every request it logs to FILE, one JSON object a line (kept across resets).
Start: fake_daytona.py --port-file F [--api-key K] [--dir D]
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_http  # noqa: E402  (handler base, server, serving)

try:  # PTY WebSockets: Debian's python3-websockets (sans-I/O, >= 10)
    from websockets.server import ServerConnection as WsServer
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        from websockets.server import ServerConnection as WsServer
    except ImportError:
        WsServer = None

CREATE_DELAY = 0.15
USER = "daytona"
SANDBOX_UID = 61000
# /tmp last: the sandbox directories themselves live below the real /tmp.
MAPPED = ("home", "mnt", "workspace", "tmp")
SDK_SPLIT_VERSION = (0, 167, 0)


def now_iso(t=None):
    return datetime.fromtimestamp(t if t is not None else time.time(),
                                  timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ApiError(Exception):
    NAMES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
             409: "Conflict", 500: "Internal Server Error"}

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class Command:
    def __init__(self, command):
        self.id = str(uuid.uuid4())
        self.command = command
        self.popen = None
        self.exit_code = None
        self.out = bytearray()  # grows as the command writes (logs follow it)
        self.err = bytearray()
        self.done = threading.Event()


class Session:
    def __init__(self, sid):
        self.id = sid
        self.commands = {}
        self.deleted = False


class Sandbox:
    def __init__(self, base, body, stuck):
        self.id = str(uuid.uuid4())
        self.name = body.get("name") or self.id
        self.labels = dict(body.get("labels") or {})
        self.snapshot = body.get("snapshot") or "daytona-small"
        self.body = body
        self.created = time.time()
        self.state = "pending_build" if stuck else "creating"
        self.stuck = stuck
        self.stop_stuck = False
        self.ready_at = self.created + CREATE_DELAY
        self.dir = tempfile.mkdtemp(prefix="sbx-fake-daytona-", dir=base)
        os.chmod(self.dir, 0o755)
        for d in MAPPED:
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        os.chmod(os.path.join(self.dir, "tmp"), 0o1777)
        home = os.path.join(self.dir, "home", USER)
        os.makedirs(home, exist_ok=True)
        own(home)
        self.sessions = {}
        self.lock = threading.Lock()
        self.preview_token = secrets.token_urlsafe(18)
        self.ptys = {}

    def host_path(self, vpath):
        if not vpath.startswith("/"):
            vpath = "/home/%s/%s" % (USER, vpath)
        norm = os.path.normpath(vpath)
        top = norm.split("/")[1] if norm != "/" else ""
        if top in MAPPED:
            return self.dir + norm
        return norm

    def tick(self):
        if self.state == "creating" and time.time() >= self.ready_at:
            self.state = "started"
        if self.state == "starting" and time.time() >= self.ready_at:
            self.state = "started"
        if self.state in ("stopping", "pausing") and not self.stop_stuck and \
                time.time() >= self.ready_at:
            self.state = "stopped" if self.state == "stopping" else "paused"

    def kill_all(self):
        with self.lock:
            sessions = list(self.sessions.values())
            self.sessions = {}
            ptys = list(self.ptys.values())
            self.ptys = {}
        for s in sessions:
            kill_session(s)
        for p in ptys:
            p.kill()
        # What left a session's process group (setsid) dies with the
        # sandbox too, as in a container: every process with its tag.
        tag = ("SBX_FAKE_SANDBOX=%s" % self.id).encode() + b"\0"
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/environ" % pid, "rb") as fh:
                    if tag in fh.read():
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass

    def to_json(self, base_url):
        self.tick()
        b = self.body
        return {"id": self.id, "organizationId": "fake-org", "name": self.name,
                "snapshot": self.snapshot, "user": b.get("user") or USER,
                "env": b.get("env") or {}, "labels": self.labels,
                "public": bool(b.get("public")), "networkBlockAll": bool(b.get("networkBlockAll")),
                "networkAllowList": b.get("networkAllowList"),
                "target": b.get("target") or "us", "cpu": b.get("cpu") or 1, "gpu": 0,
                "memory": b.get("memory") or 1, "disk": b.get("disk") or 3,
                "state": self.state, "desiredState": "started",
                "errorReason": None, "recoverable": False, "backupState": "None",
                "autoStopInterval": b.get("autoStopInterval", 15),
                "autoArchiveInterval": b.get("autoArchiveInterval", 10080),
                "autoDeleteInterval": b.get("autoDeleteInterval", -1),
                "volumes": [], "createdAt": now_iso(self.created),
                "updatedAt": now_iso(), "lastActivityAt": now_iso(),
                "daemonVersion": "0.190.0", "runnerId": "fake-runner",
                "toolboxProxyUrl": base_url + "/toolbox"}


class Pty:
    """A PTY session (swagger PtySessionInfo): a shell on a pseudo-terminal
    whose output goes to the WebSocket clients connected at the time and
    is kept nowhere, as the daemon's."""

    def __init__(self, sb, req):
        self.sb = sb
        self.id = req.get("id") or str(uuid.uuid4())
        self.cwd = req.get("cwd") or "/home/" + USER
        self.envs = dict(req.get("envs") or {})
        self.cols = int(req.get("cols") or 80)
        self.rows = int(req.get("rows") or 24)
        self.lazy = bool(req.get("lazyStart"))
        self.created = time.time()
        self.popen = None
        self.master = None
        self.clients = []
        self.lock = threading.Lock()
        self.exit_code = None
        self.done = threading.Event()

    def info(self):
        return {"id": self.id, "active": self.popen is not None and self.exit_code is None,
                "cols": self.cols, "rows": self.rows, "cwd": self.cwd, "envs": self.envs,
                "createdAt": now_iso(self.created), "lazyStart": self.lazy}

    def set_size(self):
        import fcntl
        import struct
        import termios
        if self.master is not None:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ,
                        struct.pack("HHHH", self.rows, self.cols, 0, 0))

    def start(self, handler):
        with self.lock:
            if self.popen is not None:
                return
            master, slave = os.openpty()
            os.set_inheritable(slave, False)
            self.master = master
            self.set_size()
            env = {"TERM": "xterm-256color"}
            env.update(self.envs)
            # The command is a session leader (start_new_session): opening
            # the terminal by its name makes it the controlling terminal.
            tty = os.ttyname(slave)
            if os.geteuid() == 0:
                os.chown(tty, SANDBOX_UID, SANDBOX_UID)  # the sandbox user's terminal
            self.popen = handler.spawn(self.sb, "exec /bin/bash -i <>%s >&0 2>&0" % tty,
                                       self.cwd, env, stdio=slave)
            os.close(slave)
        threading.Thread(target=self.pump, daemon=True).start()

    def pump(self):
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                data = b""
            if not data:
                break
            with self.lock:
                clients = list(self.clients)
            for c in clients:
                c.send_binary(data)
        rc = self.popen.wait()
        self.exit_code = rc if rc >= 0 else 128 - rc
        self.done.set()
        with self.lock:
            clients = list(self.clients)
        for c in clients:
            c.close_with(1000, json.dumps({"exitCode": self.exit_code}))

    def write(self, data):
        if self.master is not None and self.exit_code is None:
            os.write(self.master, data)

    def kill(self):
        if self.popen and self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except OSError:
                pass
        self.done.wait(2)
        if self.master is not None:
            try:
                os.close(self.master)
            except OSError:
                pass
            self.master = None


class WsClient:
    """One WebSocket client of a PTY, over the handler's socket."""

    def __init__(self, handler, conn):
        self.h = handler
        self.conn = conn
        self.lock = threading.Lock()
        self.closed = False

    def flush(self):
        for b in self.conn.data_to_send():
            if b:
                self.h.connection.sendall(b)

    def send_binary(self, data):
        with self.lock:
            if not self.closed:
                try:
                    self.conn.send_binary(data)
                    self.flush()
                except OSError:
                    self.closed = True

    def send_text(self, text):
        with self.lock:
            if not self.closed:
                self.conn.send_text(text.encode())
                self.flush()

    def close_with(self, code, reason):
        with self.lock:
            if not self.closed:
                self.closed = True
                try:
                    self.conn.send_close(code, reason)
                    self.flush()
                except OSError:
                    pass


def own(path):
    if os.geteuid() == 0:
        try:
            os.lchown(path, SANDBOX_UID, SANDBOX_UID)
        except OSError:
            pass


def kill_session(s):
    s.deleted = True
    for c in list(s.commands.values()):
        if c.popen and c.popen.poll() is None:
            try:
                os.killpg(c.popen.pid, signal.SIGTERM)
            except OSError:
                pass
    deadline = time.time() + 0.5
    for c in list(s.commands.values()):
        if c.popen:
            try:
                c.popen.wait(max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(c.popen.pid, signal.SIGKILL)
            except OSError:
                pass


# Commands see the sandbox's directories through a mount namespace of
# their own; as root they run as SANDBOX_UID.
NS_WRAP = None
NS_SCRIPT = ('for d in ' + " ".join(MAPPED) + '; do mount --bind "$0/$d" "/$d" || exit 125; done; '
             'cd "$1" 2>/dev/null || cd /; shift; exec "$@"')


def probe_namespaces():
    global NS_WRAP
    if os.geteuid() == 0 and not os.path.isdir("/workspace"):
        try:
            os.mkdir("/workspace", 0o755)  # an empty mount point
        except OSError:
            pass
    for wrap in (["unshare", "--mount", "--propagation", "private"],
                 ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]):
        try:
            if subprocess.run(wrap + ["true"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                NS_WRAP = wrap
                return
        except OSError:
            pass


class State(fake_http.State):
    def __init__(self, args):
        super().__init__(args, "sbx-fake-daytona-")

    def take_fault(self, path, kinds, method=None, query=""):
        with self.lock:
            for f in self.faults:
                if f.get("kind") in kinds and path.startswith(f.get("match", "")) \
                        and f.get("times", 1) > 0 and \
                        (method is None or f.get("method", method) == method) and \
                        f.get("query", "") in urllib.parse.unquote(query):
                    f["times"] = f.get("times", 1) - 1
                    return f
        return None

    def find(self, id_or_name):
        with self.lock:
            s = self.sandboxes.get(id_or_name)
            if s:
                return s
            for s in self.sandboxes.values():
                if s.name == id_or_name:
                    return s
        return None

    def delete(self, sid, delay=0.0):
        with self.lock:
            s = self.sandboxes.get(sid)
        if not s:
            return None
        s.state = "destroying"
        s.kill_all()

        def finish():
            time.sleep(delay)
            with self.lock:
                self.sandboxes.pop(sid, None)
            shutil.rmtree(s.dir, ignore_errors=True)
        if delay:
            threading.Thread(target=finish, daemon=True).start()
        else:
            finish()
        return s


ST = None
LOG_FILE = os.environ.get("SBX_FAKE_DAYTONA_LOG")


def sdk_version(headers):
    v = headers.get("X-Daytona-SDK-Version") or ""
    try:
        return tuple(int(x) for x in v.split("-")[0].split(".")[:3])
    except ValueError:
        return (0, 0, 0)


class Handler(fake_http.Handler):
    def count_connection(self):
        with ST.lock:
            ST.connections += 1

    # ---- plumbing (body_chunks, body: fake_http.Handler) -----------------
    def send_json(self, code, obj):
        data = b"" if obj is None else json.dumps(obj).encode()
        segs = [p for p in self.path.split("?")[0].split("/") if p]
        fpath = "/toolbox/" + "/".join(segs[2:]) if segs[:1] == ["toolbox"] else self.path
        # (never for the control endpoints: /_fake/stats answers under ST.lock)
        f = ST.take_fault(fpath, ("truncate",), self.command) \
            if data and not self.path.startswith("/_fake/") else None
        if f:
            # a JSON answer cut in the middle: its headers promise all of it
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(code)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_error_json(self, code, message):
        self.send_json(code, {"statusCode": code, "error": ApiError.NAMES.get(code, "Error"),
                              "message": message, "path": self.path.split("?")[0],
                              "timestamp": now_iso()})

    def record(self, body, kind):
        r = {"kind": kind, "method": self.command, "path": self.path,
             "headers": {k.lower(): v for k, v in self.headers.items()
                         if k.lower() in ("content-type", "x-daytona-sdk-version")},
             "body": body}
        with ST.lock:
            ST.requests.append(r)
            if LOG_FILE:
                # every request, across resets (the contract test's log)
                with open(LOG_FILE, "a") as fh:
                    fh.write(json.dumps(r) + "\n")

    # ---- dispatch (do_GET, do_POST, do_DELETE, do_PUT: fake_http.Handler) --
    def do_PATCH(self):
        self.dispatch()

    def dispatch(self):
        self._drained = False  # per request: the handler lives as long as the connection
        try:
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            if path.startswith("/_fake/"):
                return self.control(path)
            if path.startswith("/_preview/"):
                return self.preview(path, url)
            if ST.api_key is not None and \
                    self.headers.get("Authorization", "") != "Bearer " + ST.api_key:
                self.drain()
                return self.send_error_json(401, "Invalid credentials")
            # Toolbox faults match the path below the sandbox.
            segs = [p for p in path.split("/") if p]
            fpath = "/toolbox/" + "/".join(segs[2:]) if segs[:1] == ["toolbox"] else path
            f = ST.take_fault(fpath, ("slow",), self.command, url.query)
            if f:
                time.sleep(f.get("delay_ms", 1000) / 1000.0)
            f = ST.take_fault(fpath, ("status",), self.command, url.query)
            if f:
                self.drain()
                code = f.get("status", 503)
                return self.send_json(code, f.get("body", {
                    "statusCode": code, "error": "injected", "message": "injected failure",
                    "path": path, "timestamp": now_iso()}))
            parts = [p for p in path.split("/") if p]
            try:
                if parts and parts[0] == "toolbox" and len(parts) >= 2:
                    return self.toolbox(parts[1], "/" + "/".join(parts[2:]), url)
                if parts and parts[0] == "api":
                    parts = parts[1:]
                return self.api(parts, url)
            except ApiError as e:
                self.drain()
                return self.send_error_json(e.code, e.message)
        except (ConnectionError, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def drain(self):
        if self.command in ("POST", "PUT", "PATCH") and not getattr(self, "_drained", False):
            self._drained = True
            try:
                for _ in self.body_chunks():
                    pass
            except ConnectionError:
                pass

    def control(self, path):
        if self.common_control(path, ST):
            return
        if path == "/_fake/state":
            req = json.loads(self.body() or b"{}")
            sb = ST.find(req.get("id", ""))
            if not sb:
                return self.send_error_json(404, "no such sandbox")
            sb.kill_all()
            sb.state = req.get("state", "stopped")
            return self.send_json(200, {"ok": True})
        return self.send_error_json(404, "no such control endpoint")

    def preview(self, path, url):
        """The preview proxy: /_preview/<id>/<port>/<rest> to the sandbox's
        port (commands run on the host's network), for a request with the
        sandbox's x-daytona-preview-token (a private sandbox)."""
        import http.client
        parts = path.split("/", 4)
        body = self.body() if self.command in ("POST", "PUT", "PATCH") else None
        self._drained = True
        sb = ST.find(parts[2]) if len(parts) > 3 else None
        if not sb:
            return self.send_error_json(404, "sandbox not found")
        if self.headers.get("x-daytona-preview-token") != sb.preview_token:
            return self.send_error_json(401, "missing or wrong x-daytona-preview-token")
        try:
            port = int(parts[3])
        except ValueError:
            return self.send_error_json(400, "bad port")
        rest = "/" + (parts[4] if len(parts) > 4 else "")
        if url.query:
            rest += "?" + url.query
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            hdrs = {k: v for k, v in self.headers.items()
                    if k.lower() not in ("host", "x-daytona-preview-token", "connection")}
            c.request(self.command, rest, body=body, headers=hdrs)
            r = c.getresponse()
            data = r.read()
            c.close()
        except OSError as e:
            return self.send_error_json(502, "nothing answers on port %d: %s" % (port, e))
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def base_url(self):
        return "http://%s" % (self.headers.get("Host") or "127.0.0.1")

    def read_json(self):
        raw = self.body() if self.command in ("POST", "PUT", "PATCH") else b""
        self._drained = True
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise ApiError(400, "body is not JSON")

    # ---- API -----------------------------------------------------------
    def api(self, parts, url):
        body = self.read_json()
        self.record(body, "api")
        q = urllib.parse.parse_qs(url.query)
        if parts == ["sandbox"] and self.command == "POST":
            return self.create(body)
        if parts == ["sandbox"] and self.command == "GET":
            # ListSandboxesResponse: one page of at most `limit` items
            # (openapi.yaml listSandboxes); a cursor when more remain.
            items = self.list(q)
            try:
                limit = int(q.get("limit", ["100"])[0])
            except ValueError:
                raise ApiError(400, "limit must be a number")
            if limit < 1:
                raise ApiError(400, "limit must be at least 1")
            return self.send_json(200, {"items": items[:limit],
                                        "nextCursor": str(limit) if len(items) > limit
                                        else None})
        if parts == ["sandbox", "paginated"] and self.command == "GET":
            items = self.list(q)
            return self.send_json(200, {"items": items, "total": len(items), "page": 1,
                                        "totalPages": 1})
        if parts == ["config"] and self.command == "GET":
            return self.send_json(200, {"version": "0.190.0", "proxyToolboxUrl":
                                        self.base_url() + "/toolbox"})
        if len(parts) >= 2 and parts[0] == "sandbox":
            sb = ST.find(parts[1])
            if not sb or sb.state == "destroyed":
                raise ApiError(404, "Sandbox with ID or name %s not found" % parts[1])
            f = ST.take_fault(url.path, ("vanish",))
            if f:
                ST.delete(sb.id)
                raise ApiError(404, "Sandbox with ID or name %s not found" % parts[1])
            rest = parts[2:]
            if not rest and self.command == "GET":
                return self.send_json(200, sb.to_json(self.base_url()))
            if not rest and self.command == "DELETE":
                ST.delete(sb.id, delay=0.1)
                return self.send_json(200, sb.to_json(self.base_url()))
            if rest == ["start"] and self.command == "POST":
                sb.tick()
                if sb.state in ("stopped", "paused", "archived"):
                    sb.state = "starting"
                    sb.ready_at = time.time() + CREATE_DELAY
                elif sb.state not in ("started", "starting"):
                    raise ApiError(400, "Sandbox is in state %s" % sb.state)
                return self.send_json(200, sb.to_json(self.base_url()))
            if rest in (["stop"], ["pause"]) and self.command == "POST":
                sb.tick()
                if sb.state not in ("started", "stopping", "stopped", "pausing", "paused"):
                    raise ApiError(400, "Sandbox is in state %s" % sb.state)
                if sb.state in ("started",):
                    # Its processes end (a container that stops); the
                    # filesystem stays. "stopping"/"pausing" for a moment,
                    # or for ever with the "stuck_stop" fault.
                    sb.kill_all()
                    sb.state = "stopping" if rest == ["stop"] else "pausing"
                    sb.ready_at = time.time() + CREATE_DELAY
                    sb.stop_stuck = bool(ST.take_fault(url.path, ("stuck_stop",)))
                return self.send_json(200, sb.to_json(self.base_url()))
            if len(rest) == 3 and rest[0] == "ports" and rest[2] == "preview-url" and \
                    self.command == "GET":
                try:
                    port = int(rest[1])
                except ValueError:
                    raise ApiError(400, "port must be a number")
                if not 1 <= port <= 65535:
                    raise ApiError(400, "port out of range")
                # The real URL is https://<port>-<id>.<proxy domain>; here a
                # path below the fake that proxies to the sandbox's port.
                return self.send_json(200, {
                    "sandboxId": sb.id, "token": sb.preview_token,
                    "url": "%s/_preview/%s/%d" % (self.base_url(), sb.id, port)})
            if rest == ["toolbox-proxy-url"] and self.command == "GET":
                return self.send_json(200, {"url": self.base_url() + "/toolbox"})
            if len(rest) == 2 and rest[0] == "autostop" and self.command == "POST":
                sb.body["autoStopInterval"] = int(rest[1])
                return self.send_json(200, None)
            if rest == ["labels"] and self.command == "PUT":
                if not isinstance(body, dict) or not isinstance(body.get("labels"), dict):
                    raise ApiError(400, "labels is required")
                sb.labels = dict(body["labels"])
                return self.send_json(200, {"labels": sb.labels})
        raise ApiError(404, "Cannot %s %s" % (self.command, url.path))

    def create(self, body):
        if not isinstance(body, dict):
            raise ApiError(400, "body is required")
        labels = body.get("labels") or {}
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise ApiError(400, "labels must be a map of strings")
        for k in ("autoStopInterval", "autoArchiveInterval", "autoDeleteInterval", "cpu",
                  "memory", "disk"):
            if k in body and not isinstance(body[k], int):
                raise ApiError(400, "%s must be an integer" % k)
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not name):
            raise ApiError(400, "name must be a string")
        stuck = ST.take_fault("/sandbox", ("stuck",)) is not None
        sb = Sandbox(ST.base, body, stuck)
        with ST.lock:
            # Names are unique in the organization: checked and taken at once.
            if name is not None and any(s.name == name for s in ST.sandboxes.values()):
                clash = True
            else:
                clash = False
                ST.sandboxes[sb.id] = sb
        if clash:
            shutil.rmtree(sb.dir, ignore_errors=True)
            raise ApiError(409, "Sandbox with name %s already exists" % name)
        return self.send_json(200, sb.to_json(self.base_url()))

    def list(self, q):
        want = {}
        if q.get("labels"):
            try:
                want = json.loads(q["labels"][0])
            except ValueError:
                raise ApiError(400, "labels must be JSON")
        states = []
        for s in q.get("states", []):
            states += s.split(",")
        with ST.lock:
            sbs = list(ST.sandboxes.values())
        out = []
        for s in sbs:
            s.tick()
            if states and s.state not in states:
                continue
            if all(s.labels.get(k) == v for k, v in want.items()):
                out.append(s.to_json(self.base_url()))
        return out

    # ---- toolbox -------------------------------------------------------
    def toolbox(self, sid, path, url):
        sb = ST.find(sid)
        f = ST.take_fault("/toolbox" + path, ("vanish",))
        if f and sb:
            ST.delete(sb.id)
            sb = None
        if not sb:
            self.drain()
            raise ApiError(404, "Sandbox with ID or name %s not found" % sid)
        sb.tick()
        if sb.state != "started":
            self.drain()
            raise ApiError(400, "Sandbox is not running (state %s)" % sb.state)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        m = self.command
        if path == "/files/upload" and m == "POST":
            return self.upload(sb, q)
        if path == "/files/download" and m == "GET":
            return self.download(sb, q)
        if path == "/files/bulk-upload" and m == "POST":
            return self.bulk_upload(sb)
        body = self.read_json()
        self.record(body, "toolbox")
        if path == "/files/bulk-download" and m == "POST":
            return self.bulk_download(sb, body)
        if path == "/files/folder" and m == "POST":
            hp = sb.host_path(need(q, "path"))
            mode = int(need(q, "mode"), 8)
            if os.path.exists(hp) and not os.path.isdir(hp):
                raise ApiError(400, "path exists and is not a directory")
            made = []
            p = hp
            while not os.path.exists(p):
                made.append(p)
                p = os.path.dirname(p)
            os.makedirs(hp, mode=mode, exist_ok=True)
            for p in made:
                own(p)
            return self.send_json(201, None)
        if path == "/files/permissions" and m == "POST":
            hp = sb.host_path(need(q, "path"))
            if not os.path.lexists(hp):
                raise ApiError(404, "file not found")
            if q.get("mode"):
                os.chmod(hp, int(q["mode"], 8))
            return self.send_json(200, None)
        if path == "/files/move" and m == "POST":
            src, dst = sb.host_path(need(q, "source")), sb.host_path(need(q, "destination"))
            if not os.path.lexists(src):
                raise ApiError(404, "source not found")
            if not os.path.isdir(os.path.dirname(dst)):
                raise ApiError(404, "destination directory not found")
            # The daemon refuses to replace (fs/move_file.go: 409).
            if os.path.lexists(dst):
                raise ApiError(409, "destination already exists")
            os.rename(src, dst)
            return self.send_json(200, None)
        if path == "/files" and m == "DELETE":
            hp = sb.host_path(need(q, "path"))
            if not os.path.lexists(hp):
                raise ApiError(404, "file not found")
            if os.path.isdir(hp) and not os.path.islink(hp):
                if q.get("recursive") != "true":
                    raise ApiError(400, "directory: set recursive")
                shutil.rmtree(hp, ignore_errors=True)
            else:
                os.unlink(hp)
            return self.send_json(204, None)
        if path == "/files" and m == "GET":
            hp = sb.host_path(q.get("path") or "/home/" + USER)
            if not os.path.isdir(hp):
                raise ApiError(404, "directory not found")
            return self.send_json(200, [file_info(os.path.join(hp, n), follow=False)
                                        for n in sorted(os.listdir(hp))])
        if path == "/files/info" and m == "GET":
            hp = sb.host_path(need(q, "path"))
            if not os.path.exists(hp):
                raise ApiError(404, "file not found")
            return self.send_json(200, file_info(hp))
        if path in ("/user-home-dir", "/work-dir") and m == "GET":
            return self.send_json(200, {"dir": "/home/" + USER})
        if path == "/version" and m == "GET":
            return self.send_json(200, {"version": "0.190.0"})
        if path == "/process/execute" and m == "POST":
            return self.execute(sb, body)
        if path == "/process/pty" or path.startswith("/process/pty/"):
            return self.pty_route(sb, path, m, body)
        if path == "/process/session":
            if m == "POST":
                sid2 = (body or {}).get("sessionId")
                if not isinstance(sid2, str) or not sid2:
                    raise ApiError(400, "sessionId is required")
                with sb.lock:
                    if sid2 in sb.sessions:
                        raise ApiError(409, "session already exists")
                    sb.sessions[sid2] = Session(sid2)
                return self.send_json(201, None)
            if m == "GET":
                with sb.lock:
                    ss = list(sb.sessions.values())
                return self.send_json(200, [session_json(s) for s in ss])
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[:2] == ["process", "session"]:
            with sb.lock:
                s = sb.sessions.get(parts[2])
            if not s:
                raise ApiError(404, "session not found")
            rest = parts[3:]
            if not rest and m == "DELETE":
                with sb.lock:
                    sb.sessions.pop(s.id, None)
                kill_session(s)
                return self.send_json(204, None)
            if not rest and m == "GET":
                return self.send_json(200, session_json(s))
            if rest == ["exec"] and m == "POST":
                return self.session_exec(sb, s, body)
            if len(rest) >= 2 and rest[0] == "command":
                c = s.commands.get(rest[1])
                if not c:
                    raise ApiError(404, "command not found")
                if len(rest) == 2 and m == "GET":
                    return self.send_json(200, command_json(c))
                if rest[2:] == ["logs"] and m == "GET":
                    if q.get("follow") == "true":
                        return self.logs_follow(c)
                    if sdk_version(self.headers) >= SDK_SPLIT_VERSION:
                        return self.send_json(200, {"output": (c.out + c.err).decode(errors="replace"),
                                                    "stdout": c.out.decode(errors="replace"),
                                                    "stderr": c.err.decode(errors="replace")})
                    data = c.out + c.err
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    return self.wfile.write(data)
        raise ApiError(404, "no toolbox route %s %s" % (m, path))

    def pty_route(self, sb, path, m, body):
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2:
            if m == "GET":
                with sb.lock:
                    ps = list(sb.ptys.values())
                return self.send_json(200, {"sessions": [p.info() for p in ps]})
            if m == "POST":
                req = body if isinstance(body, dict) else {}
                p = Pty(sb, req)
                with sb.lock:
                    if p.id in sb.ptys:
                        raise ApiError(409, "PTY session %s already exists" % p.id)
                    sb.ptys[p.id] = p
                if not p.lazy:
                    p.start(self)
                return self.send_json(201, {"sessionId": p.id})
        with sb.lock:
            p = sb.ptys.get(parts[2]) if len(parts) >= 3 else None
        if not p:
            raise ApiError(404, "PTY session not found")
        rest = parts[3:]
        if not rest and m == "GET":
            return self.send_json(200, p.info())
        if not rest and m == "DELETE":
            with sb.lock:
                sb.ptys.pop(p.id, None)
            p.kill()
            return self.send_json(200, {"message": "PTY session deleted"})
        if rest == ["resize"] and m == "POST":
            req = body if isinstance(body, dict) else {}
            cols, rows = req.get("cols"), req.get("rows")
            if not all(isinstance(v, int) and 1 <= v <= 1000 for v in (cols, rows)):
                raise ApiError(400, "cols and rows are 1..1000")
            p.cols, p.rows = cols, rows
            p.set_size()  # the kernel sends SIGWINCH to the foreground group
            return self.send_json(200, p.info())
        if rest == ["connect"] and m == "GET":
            return self.pty_connect(p)
        raise ApiError(404, "no toolbox route %s %s" % (m, path))

    def ws_accept(self):
        """Complete a WebSocket handshake on this connection (the request
        line and headers are parsed already) and return the client."""
        if WsServer is None:
            raise ApiError(501, "the fake has no WebSocket library (install python3-websockets)")
        if self.headers.get("Upgrade", "").lower() != "websocket":
            raise ApiError(400, "this is a WebSocket endpoint")
        conn = WsServer()
        raw = (self.requestline + "\r\n" +
               "".join("%s: %s\r\n" % (k, v) for k, v in self.headers.items()) + "\r\n")
        conn.receive_data(raw.encode("latin-1"))
        reqs = conn.events_received()
        if not reqs:
            raise ApiError(400, "bad WebSocket handshake")
        conn.send_response(conn.accept(reqs[0]))
        client = WsClient(self, conn)
        client.flush()
        self.close_connection = True
        return client

    def logs_follow(self, c):
        """GET .../logs?follow=true as a WebSocket: the command's output as
        it comes, each chunk after its stream's prefix (0x01 x3 stdout,
        0x02 x3 stderr, as the SDK's stdDemuxStream reads it), closed when
        the command has ended and everything was sent."""
        client = self.ws_accept()
        sent = [0, 0]
        while not client.closed:
            ended = c.done.is_set()
            for i, (buf, pre) in enumerate(((c.out, b"\x01\x01\x01"), (c.err, b"\x02\x02\x02"))):
                n = len(buf)
                if n > sent[i]:
                    client.send_binary(pre + bytes(buf[sent[i]:n]))
                    sent[i] = n
            if ended:
                client.close_with(1000, "")
                break
            time.sleep(0.02)

    def pty_connect(self, p):
        client = self.ws_accept()
        conn = client.conn
        p.start(self)
        client.send_text(json.dumps({"type": "control", "status": "connected"}))
        with p.lock:
            p.clients.append(client)
        if p.exit_code is not None:
            client.close_with(1000, json.dumps({"exitCode": p.exit_code}))
        try:
            while not client.closed:
                data = self.connection.recv(65536)
                if not data:
                    break
                with client.lock:
                    conn.receive_data(data)
                    events = conn.events_received()
                for ev in events:
                    op = getattr(ev, "opcode", None)
                    if op is not None and op.name in ("TEXT", "BINARY"):
                        p.write(ev.data)
                    elif op is not None and op.name == "CLOSE":
                        client.closed = True
                with client.lock:
                    client.flush()
        except OSError:
            pass
        finally:
            with p.lock:
                if client in p.clients:
                    p.clients.remove(client)

    def upload(self, sb, q):
        vpath = q.get("path")
        ctype = self.headers.get("Content-Type", "")
        self.record(None, "toolbox")
        if not vpath:
            raise ApiError(400, "path is required")
        bnd = None
        for p in ctype.split(";"):
            p = p.strip()
            if p.startswith("boundary="):
                bnd = p[len("boundary="):].strip('"')
        if not ctype.startswith("multipart/form-data") or not bnd:
            raise ApiError(400, "want multipart/form-data with a boundary")
        hp = sb.host_path(vpath)
        if os.path.isdir(hp):
            raise ApiError(400, "path is a directory")
        parent = os.path.dirname(hp)
        made = []
        p = parent
        while not os.path.exists(p):
            made.append(p)
            p = os.path.dirname(p)
        os.makedirs(parent, exist_ok=True)
        for p in made:
            own(p)
        tmp = hp + ".fake-upload"
        try:
            got = stream_multipart(self.body_chunks(), bnd.encode(), tmp)
        except BaseException:
            # A body cut short (the client gave up) writes nothing, as the
            # daemon's multipart parsing fails before the file is saved.
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        if not got:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise ApiError(400, "no file part")
        os.rename(tmp, hp)
        own(hp)
        return self.send_json(200, {"message": "File uploaded successfully"})

    def bulk_upload(self, sb):
        # The SDK's uploadFile(s): fields files[i].path and files[i].file.
        # Parsed whole: the SDK's files in the fidelity test are small.
        self.record(None, "toolbox")
        bnd = boundary_of(self.headers.get("Content-Type", ""))
        if not bnd:
            raise ApiError(400, "want multipart/form-data with a boundary")
        paths, datas = {}, {}
        for name, _, data in parse_multipart(self.body(), bnd):
            if name.endswith("].path"):
                paths[name[:-len(".path")]] = data.decode()
            elif name.endswith("].file"):
                datas[name[:-len(".file")]] = data
        for k, data in datas.items():
            if k not in paths:
                raise ApiError(400, "%s.file has no path" % k)
            hp = sb.host_path(paths[k])
            os.makedirs(os.path.dirname(hp), exist_ok=True)
            with open(hp, "wb") as fh:
                fh.write(data)
            own(hp)
        return self.send_json(200, None)

    def bulk_download(self, sb, body):
        # Parts "file" (filename = the requested path) or "error" (JSON).
        paths = (body or {}).get("paths")
        if not isinstance(paths, list):
            raise ApiError(400, "paths is required")
        bnd = secrets.token_hex(12)
        out = []
        for p in paths:
            hp = sb.host_path(p)
            if os.path.isfile(hp):
                with open(hp, "rb") as fh:
                    data, name, ctype = fh.read(), "file", "application/octet-stream"
            else:
                data = json.dumps({"message": "file not found", "statusCode": 404,
                                   "code": "FILE_NOT_FOUND"}).encode()
                name, ctype = "error", "application/json"
            out.append(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                       b"Content-Type: %s\r\n\r\n" % (bnd.encode(), name.encode(), p.encode(),
                                                     ctype.encode()) + data + b"\r\n")
        out.append(b"--%s--\r\n" % bnd.encode())
        raw = b"".join(out)
        self.send_response(200)
        self.send_header("Content-Type", "multipart/form-data; boundary=%s" % bnd)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def download(self, sb, q):
        self.record(None, "toolbox")
        hp = sb.host_path(need(q, "path"))
        if not os.path.exists(hp):
            raise ApiError(404, "file not found")
        if os.path.isdir(hp):
            raise ApiError(400, "path is a directory")
        size = os.path.getsize(hp)
        cut = None
        with ST.lock:
            for f in ST.faults:
                if f.get("kind") == "cut" and f.get("times", 1) > 0 and \
                        size >= f.get("min_size", 0):
                    f["times"] = f.get("times", 1) - 1
                    cut = f
                    break
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Disposition", 'attachment; filename="%s"' % os.path.basename(hp))
        self.send_header("Content-Length", str(size))
        self.end_headers()
        with open(hp, "rb") as fh:
            if cut:
                self.wfile.write(fh.read(size // 2))
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            shutil.copyfileobj(fh, self.wfile, 1 << 16)

    # ---- commands ------------------------------------------------------
    def spawn(self, sb, command, cwd, extra_env=None, stdio=None):
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/home/" + USER, "USER": USER, "LOGNAME": USER, "SHELL": "/bin/sh",
               "LANG": "C.UTF-8"}
        env.update(sb.body.get("env") or {})
        env.update(extra_env or {})
        env["SBX_FAKE_SANDBOX"] = sb.id  # found and killed with the sandbox
        argv = ["/bin/sh", "-c", command]
        if NS_WRAP is None:
            raise ApiError(500, "the fake cannot make mount namespaces (run it as root)")
        if os.geteuid() == 0:
            argv = ["setpriv", "--reuid=%d" % SANDBOX_UID, "--regid=%d" % SANDBOX_UID,
                    "--clear-groups", "--"] + argv
        argv = NS_WRAP + ["/bin/sh", "-c", NS_SCRIPT, sb.dir, cwd] + argv
        if stdio is not None:
            return subprocess.Popen(argv, cwd=sb.dir, env=env, stdin=stdio, stdout=stdio,
                                    stderr=stdio, start_new_session=True, close_fds=True)
        return subprocess.Popen(argv, cwd=sb.dir, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, close_fds=True)

    def run(self, c):
        def pump(stream, buf):
            while True:
                b = os.read(stream.fileno(), 65536)
                if not b:
                    break
                buf.extend(b)
        ts = [threading.Thread(target=pump, args=(c.popen.stdout, c.out), daemon=True),
              threading.Thread(target=pump, args=(c.popen.stderr, c.err), daemon=True)]
        for t in ts:
            t.start()
        rc = c.popen.wait()
        for t in ts:
            t.join(0.5)
        # The session shell's $?: 128+N after a death by signal N.
        c.exit_code = rc if rc >= 0 else 128 - rc
        c.done.set()

    def session_exec(self, sb, s, body):
        if not isinstance(body, dict) or not isinstance(body.get("command"), str):
            raise ApiError(400, "command is required")
        c = Command(body["command"])
        c.popen = self.spawn(sb, c.command, "/home/" + USER)
        s.commands[c.id] = c
        if s.deleted:
            kill_session(s)
        asynchronous = body.get("runAsync") or body.get("async")
        threading.Thread(target=self.run, args=(c,), daemon=True).start()
        if asynchronous:
            return self.send_json(202, {"cmdId": c.id})
        c.done.wait()
        out = {"cmdId": c.id, "exitCode": c.exit_code,
               "output": (c.out + c.err).decode(errors="replace")}
        if sdk_version(self.headers) >= SDK_SPLIT_VERSION:
            out["stdout"] = c.out.decode(errors="replace")
            out["stderr"] = c.err.decode(errors="replace")
        return self.send_json(200, out)

    def execute(self, sb, body):
        # The plain execute call: stdout and stderr mixed, no cancel;
        # timeout kills the group and answers 408 (execute.go:98).
        if not isinstance(body, dict) or not isinstance(body.get("command"), str):
            raise ApiError(400, "command is required")
        cwd = body.get("cwd") or "/home/" + USER
        c = Command(body["command"])
        c.popen = self.spawn(sb, "exec 2>&1; " + c.command, cwd, body.get("envs"))
        threading.Thread(target=self.run, args=(c,), daemon=True).start()
        timeout = body.get("timeout")
        if not c.done.wait(timeout if isinstance(timeout, int) and timeout > 0 else None):
            try:
                os.killpg(c.popen.pid, signal.SIGKILL)
            except OSError:
                pass
            raise ApiError(408, "command execution timeout")
        return self.send_json(200, {"exitCode": c.exit_code,
                                    "result": c.out.decode(errors="replace")})


def need(q, key):
    v = q.get(key)
    if not v:
        raise ApiError(400, "%s is required" % key)
    return v


def go_mode(m):
    """Go's FileMode.String() of a stat mode: "drwxr-xr-x", "Lrwxrwxrwx",
    "-rw-r--r--", "prw-r--r--", "Srwx------", "Dcrw-rw-rw-"."""
    import stat as pystat
    t = ""
    if pystat.S_ISDIR(m):
        t = "d"
    elif pystat.S_ISLNK(m):
        t = "L"
    elif pystat.S_ISFIFO(m):
        t = "p"
    elif pystat.S_ISSOCK(m):
        t = "S"
    elif pystat.S_ISCHR(m):
        t = "Dc"
    elif pystat.S_ISBLK(m):
        t = "D"
    perm = "".join(c if m & (1 << (8 - i)) else "-" for i, c in enumerate("rwxrwxrwx"))
    return (t or "-") + perm


def file_info(hp, follow=True):
    # GetFileInfo stats (follows a symlink); ListFiles reads the directory
    # (os.ReadDir + Info: lstat, a symlink is itself).
    import stat as pystat
    st = os.stat(hp) if follow else os.lstat(hp)
    return {"name": os.path.basename(hp), "isDir": pystat.S_ISDIR(st.st_mode),
            "size": st.st_size, "mode": go_mode(st.st_mode),
            "permissions": "%04o" % pystat.S_IMODE(st.st_mode), "owner": USER, "group": USER,
            "modTime": time.ctime(st.st_mtime), "modifiedAt": now_iso(st.st_mtime)}


def session_json(s):
    return {"sessionId": s.id, "commands": [command_json(c) for c in s.commands.values()]}


def command_json(c):
    d = {"id": c.id, "command": c.command}
    if c.exit_code is not None:
        d["exitCode"] = c.exit_code
    return d


def boundary_of(ctype):
    if not ctype.startswith("multipart/form-data"):
        return None
    for p in ctype.split(";"):
        p = p.strip()
        if p.startswith("boundary="):
            return p[len("boundary="):].strip('"')
    return None


def parse_multipart(raw, bnd):
    """(name, filename, data) of each part of a whole multipart body."""
    out = []
    for part in raw.split(b"--" + bnd.encode())[1:]:
        if part.startswith(b"--"):
            break
        head, sep, data = part.partition(b"\r\n\r\n")
        if not sep:
            continue
        if data.endswith(b"\r\n"):
            data = data[:-2]
        name = filename = None
        for line in head.decode(errors="replace").split("\r\n"):
            if line.lower().startswith("content-disposition:"):
                for item in line.split(";")[1:]:
                    k, _, v = item.strip().partition("=")
                    if k == "name":
                        name = v.strip('"')
                    elif k == "filename":
                        filename = v.strip('"')
        out.append((name or "", filename, data))
    return out


def stream_multipart(chunks, bnd, dest):
    """Write the "file" part of a multipart body to dest as it arrives.
    Returns True when a complete file part was found."""
    delim = b"\r\n--" + bnd
    buf = b""
    it = iter(chunks)

    def more():
        nonlocal buf
        b = next(it, None)
        if b is None:
            return False
        buf += b
        return True
    # Preamble up to the first boundary line.
    first = b"--" + bnd
    while first not in buf:
        if not more():
            return False
    buf = b"\r\n" + buf[buf.index(first):]
    found = False
    while True:
        # buf starts at "\r\n--bnd"
        while len(buf) < len(delim) + 2:
            if not more():
                return found
        if buf[len(delim):len(delim) + 2] == b"--":
            for _ in it:
                pass
            return found
        while b"\r\n\r\n" not in buf:
            if not more():
                return False
        head, _, buf = buf.partition(b"\r\n\r\n")
        is_file = b'name="file"' in head
        out = open(dest, "wb") if is_file and not found else None
        try:
            while True:
                i = buf.find(delim)
                if i >= 0:
                    if out:
                        out.write(buf[:i])
                    buf = buf[i:]
                    break
                keep = len(delim) - 1
                if len(buf) > keep:
                    if out:
                        out.write(buf[:-keep])
                    buf = buf[-keep:]
                if not more():
                    return False
        finally:
            if out:
                out.close()
        if out:
            found = True


def main():
    global ST
    fake_http.default_signals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--api-key")
    ap.add_argument("--dir")
    args = ap.parse_args()
    ST = State(args)
    probe_namespaces()
    srv = fake_http.Server(("127.0.0.1", args.port), Handler)
    fake_http.serve(srv, ST, args.port_file)


if __name__ == "__main__":
    main()
