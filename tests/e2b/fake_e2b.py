#!/usr/bin/env python3
"""fake_e2b.py - a stateful fake of the E2B control plane and envd (or of
CubeAPI and its Host-routed CubeProxy with --mode cube), for the tests.

Follows the subset of /work/shared/specs/e2b (openapi.yml, envd.yaml,
process.proto, filesystem.proto) that the e2b and cube providers and the
official JavaScript SDK use. Commands really run, as host processes, in a
per-sandbox temporary directory: the sandbox's "/home/user" (and every
virtual path below "/home" and "/mnt") maps into it. This is a test double,
not a sandbox: nothing is isolated.

Users as envd has them: the request's user (HTTP basic auth for RPCs and
Start, the "username" query parameter of /files) owns what envd creates
for it, and, when the fake runs as root with mount namespaces, commands of
the sandbox user run as uid SANDBOX_UID (no account of the test machine),
those of "root" as root, so permission bits hold inside the sandbox as they
do in E2B's VM. Otherwise every command runs as the fake's own user (and
read-only files are not read-only to it).

Processes: Start (pipes, or with "pty" a real terminal from Python's pty
support, the command its session leader), Connect (events from the moment
of the call: envd keeps no history), SendInput (stdin or pty), StreamInput
(a client stream), CloseStdin, SendSignal, Update (the PTY's size), List;
selectors by pid or tag. Each sandbox has its own /tmp (bound over /tmp for
its commands, like /home and /mnt), every command carries E2B_SANDBOX_ID,
and delete kills every process that carries it, detached ones too.
Pause (POST /sandboxes/{id}/pause, auto-pause at the end of the TTL, the
"pause" fault) stops them all with SIGSTOP, as a VM paused with its memory
snapshot; resume (connect; /resume, the route CubeAPI documents) continues
them with SIGCONT. While paused, envd is unreachable: the proxy's answer
for a sandbox it cannot reach (E2B 502, CubeProxy 500). A Host "<port>-<id>.<domain>" other than envd's port is the service's
port proxy: the request is forwarded to 127.0.0.1:<port>.
Snapshots (E2B mode; CubeAPI has none): POST /sandboxes/{id}/snapshots
copies the sandbox's whole directory (files with their modes, owners and
times, symlinks as links, FIFOs made anew; not its processes: the fake
keeps no memory) as a template, "fake-team/<name>:default" when named
(the same name again replaces the template's copy, as a new build) or
"<id>:default"; POST /sandboxes with that templateID (or the name, with
or without team and tag) starts a sandbox from a copy of it; GET
/snapshots lists them (sandboxID, name filters); DELETE
/templates/{templateID} deletes one (404 when there is none). A paused
sandbox is refused (409): the spec documents snapshots of running ones.
The official SDK's createSnapshot, Sandbox.create(snapshotId),
listSnapshots and deleteSnapshot accept these (sdk/sdk_fidelity.mjs).

Control endpoints (not part of any spec) under /_fake/:
  POST /_fake/faults  [{"match": "/process.Process/Start", "kind": ...}]
      kinds: "status" (answer "status" with "body"), "slow" ("delay_ms"
      before answering), "cut" (Start stream closed mid-envelope after
      "after" data events; GET /files: half the body, then the connection
      closes), "truncate" (Start: half an envelope, then a
      clean end of the body; a control plane path: half its JSON answer,
      then the connection closes), "vanish" (the sandbox disappears before the
      request is served), "pause" (the sandbox is paused), "stuck" (POST
      /sandboxes/{id}/pause never finishes: 30 s, then 500). "times"
      (default 1) bounds how often a fault fires; "method" limits it to
      requests of that method, "exact": true to the path "match" itself.
  GET  /_fake/stats   {"connections": n, "requests": [{method, path, body}]}
  POST /_fake/reset   forget faults and the request log
Start: fake_e2b.py --port-file F [--mode e2b|cube] [--api-key K] [--dir D]
"""
import argparse
import base64
import fcntl
import http.client
import json
import os
import queue
import secrets
import shutil
import signal
import socketserver
import stat as pystat
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import urllib.parse
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_http  # noqa: E402  (handler base, server, serving)

ENVD_PORT = 49983
ENVD_VERSION = "0.5.7"
USER = "user"
# The sandbox user's uid when the fake runs as root (E2B's is 1000; this
# one matches no account of a test machine).
SANDBOX_UID = 61000
# Set in main: the fake is root and gives commands a mount namespace of
# their own (their paths then never pass through the fake's directories).
SWITCH_USERS = False


def uid_of(user):
    """The uid commands and new files of `user` get (None: the fake's own)."""
    if not SWITCH_USERS:
        return None
    return 0 if user == "root" else SANDBOX_UID


def chown_new(path, user):
    uid = uid_of(user)
    if uid is not None:
        os.lchown(path, uid, uid)


def makedirs_as(path, user):
    """os.makedirs, the directories it made owned by user (as envd does)."""
    made = []
    p = path
    while p and not os.path.lexists(p):
        made.append(p)
        p = os.path.dirname(p)
    os.makedirs(path, exist_ok=True)
    for d in made:
        chown_new(d, user)

SIGNAMES = {1: "hangup", 2: "interrupt", 3: "quit", 4: "illegal instruction",
            5: "trace/breakpoint trap", 6: "aborted", 7: "bus error",
            8: "floating point exception", 9: "killed", 10: "user defined signal 1",
            11: "segmentation fault", 12: "user defined signal 2", 13: "broken pipe",
            14: "alarm clock", 15: "terminated"}


def now_iso(t=None):
    return datetime.fromtimestamp(t if t is not None else time.time(),
                                  timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def copy_into(src, dst):
    """Copy the entries of directory src into the existing dst: regular
    files, directories (mode set once filled: a read-only one stays so),
    symlinks as links (never followed), FIFOs made anew; owners when the
    fake is root, and times. Sockets and devices are left out."""
    for name in os.listdir(src):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        st = os.lstat(s)
        m = st.st_mode
        if pystat.S_ISLNK(m):
            os.symlink(os.readlink(s), d)
        elif pystat.S_ISDIR(m):
            os.mkdir(d, 0o700)
            copy_into(s, d)
        elif pystat.S_ISREG(m):
            shutil.copyfile(s, d, follow_symlinks=False)
        elif pystat.S_ISFIFO(m):
            os.mkfifo(d)
        else:
            continue
        if not pystat.S_ISLNK(m):
            os.chmod(d, pystat.S_IMODE(m))
        if os.geteuid() == 0:
            os.lchown(d, st.st_uid, st.st_gid)
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


class Snapshot:
    """A snapshot template: a copy of a sandbox's directory."""

    def __init__(self, base, sb, name):
        raw = "s" + secrets.token_hex(10)
        self.alias = name or raw
        self.snapshot_id = ("fake-team/%s:default" % name) if name else raw + ":default"
        self.sandbox_id = sb.id
        self.dir = None
        self.take(base, sb)

    def take(self, base, sb):
        d = tempfile.mkdtemp(prefix="sbx-fake-snap-", dir=base)
        copy_into(sb.dir, d)
        old, self.dir, self.sandbox_id = self.dir, d, sb.id
        if old:
            shutil.rmtree(old, ignore_errors=True)

    def matches(self, ref):
        """ref names it: its snapshotID, or that without the tag, the team
        or both (name or ID, "optionally tag-qualified")."""
        bare = self.snapshot_id.split(":", 1)[0]
        return ref in (self.snapshot_id, bare, self.alias, self.alias + ":default")

    def info(self):
        return {"snapshotID": self.snapshot_id, "names": [self.snapshot_id]}


class Sandbox:
    # The variable every command carries, naming its sandbox (signal_all).
    MARK_VAR = "E2B_SANDBOX_ID"

    def __init__(self, base, template, metadata, timeout, auto_pause, envs, mode,
                 from_dir=None):
        self.id = "i" + secrets.token_hex(10)
        self.template = template
        self.metadata = dict(metadata or {})
        self.started = time.time()
        self.end = self.started + timeout
        self.auto_pause = auto_pause
        self.state = "running"
        self.cold = False
        self.token = secrets.token_hex(16) if mode == "e2b" else None
        # CubeAPI hard-codes envdVersion 0.2.0 (constants.rs:8).
        self.envd_version = ENVD_VERSION if mode == "e2b" else "0.2.0"
        self.dir = tempfile.mkdtemp(prefix="sbx-fake-%s-" % self.id, dir=base)
        self.envs = dict(envs or {})
        if from_dir:
            # A snapshot's template: its files, then what every sandbox has.
            copy_into(from_dir, self.dir)
        os.makedirs(os.path.join(self.dir, "home", USER), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "mnt"), exist_ok=True)
        # The sandbox's own /tmp (bound over /tmp for its commands).
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        os.chmod(os.path.join(self.dir, "tmp"), 0o1777)
        # The user's commands pass through the directory (without mount
        # namespaces they use host paths) and own their home.
        os.chmod(self.dir, 0o711)
        chown_new(os.path.join(self.dir, "home", USER), USER)
        self.procs = {}
        self.lock = threading.Lock()

    def host_path(self, vpath, user=USER):
        if not vpath.startswith("/"):
            vpath = "/home/%s/%s" % (user, vpath)
        norm = os.path.normpath(vpath)
        if any(norm == t or norm.startswith(t + "/") for t in ("/home", "/mnt", "/tmp")):
            return self.dir + norm
        return norm

    def virtual(self, hpath):
        if hpath == self.dir or hpath.startswith(self.dir + "/"):
            return hpath[len(self.dir):] or "/"
        return hpath

    def signal_all(self, sig):
        # Every process the sandbox started, also those that left their
        # session (found by the E2B_SANDBOX_ID each command inherits).
        with self.lock:
            procs = list(self.procs.values())
        for p in procs:
            try:
                os.killpg(p.popen.pid, sig)
            except OSError:
                pass
        mark = ("%s=%s" % (self.MARK_VAR, self.id)).encode()
        for _ in range(3 if sig == signal.SIGKILL else 1):
            found = 0
            for pid in os.listdir("/proc"):
                if not pid.isdigit() or int(pid) == os.getpid():
                    continue
                try:
                    with open("/proc/%s/environ" % pid, "rb") as f:
                        if mark not in f.read().split(b"\0"):
                            continue
                    os.kill(int(pid), sig)
                    found += 1
                except OSError:
                    pass
            if not found:
                break

    def kill_all(self):
        # As a VM that stops. A stopped process dies of SIGKILL as well.
        self.signal_all(signal.SIGKILL)

    def pause(self, memory=True):
        # As a VM paused with a memory snapshot: nothing of it runs, its
        # processes continue where they stopped on resume. Without the
        # memory snapshot (SandboxPauseRequest.memory false) only the
        # filesystem is kept: resume cold-boots, the processes are gone.
        self.state = "paused"
        self.cold = not memory
        if memory:
            self.signal_all(signal.SIGSTOP)
        else:
            self.kill_all()

    def resume(self):
        self.state = "running"
        self.signal_all(signal.SIGCONT)

    def detail(self, full=True):
        d = {"templateID": self.template, "sandboxID": self.id, "clientID": "fake",
             "startedAt": now_iso(self.started), "endAt": now_iso(self.end),
             "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024,
             "state": self.state, "envdVersion": self.envd_version,
             "metadata": self.metadata}
        if full and self.token:
            d["envdAccessToken"] = self.token
        return d

    def created(self, domain):
        d = {"templateID": self.template, "sandboxID": self.id, "clientID": "fake",
             "envdVersion": self.envd_version, "domain": domain}
        if self.token:
            d["envdAccessToken"] = self.token
            d["trafficAccessToken"] = None
        return d


# Commands see the sandbox's /home and /mnt when the fake may make a mount
# namespace per command (root, or unprivileged user namespaces): the
# sandbox directory's home/ and mnt/ are bound over them, so a command
# writing /mnt/session/outputs/x writes what envd's /files serves. Without
# namespaces, commands see the host's /home and /mnt (paths only reach the
# sandbox through envd's file calls).
NS_WRAP = None
NS_SCRIPT = ('mount --bind "$0/home" /home && mount --bind "$0/mnt" /mnt && '
             'mount --bind "$0/tmp" /tmp || exit 125; '
             'cd "$1" 2>/dev/null || { echo "cwd $1 does not exist" >&2; exit 125; }; '
             'u=$2; shift 2; '
             'if [ -n "$u" ]; then exec setpriv --reuid "$u" --regid "$u" --clear-groups -- "$@"; fi; '
             'exec "$@"')


def probe_namespaces():
    global NS_WRAP
    for wrap in (["unshare", "--mount", "--propagation", "private"],
                 ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]):
        try:
            if subprocess.run(wrap + ["true"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                NS_WRAP = wrap
                return
        except OSError:
            pass


def which(cmd, path):
    if "/" in cmd:
        return cmd if os.path.exists(cmd) else None
    for d in path.split(":"):
        p = os.path.join(d, cmd)
        if os.path.isfile(p):
            return p
    return None


class Proc:
    """A running process and the streams (Start's, Connect's) that follow
    its events; envd keeps no history: a stream sees events from when it
    subscribed on."""
    def __init__(self, popen, stdin_open, master=None):
        self.popen = popen
        self.stdin_open = stdin_open
        self.master = master  # PTY master fd, or None
        self.lock = threading.Lock()
        # stdin's own lock: a write blocks while the command does not read,
        # and the output readers (emit) must go on meanwhile, or a command
        # blocked on a full stdout never reads its stdin again.
        self.stdin_lock = threading.Lock()
        self.subs = []
        self.done = False
        self.tag = None
        self.argv = []
        self.envs = {}
        self.cwd = None

    def subscribe(self):
        q = queue.Queue()
        with self.lock:
            if self.done:
                return None
            self.subs.append(q)
        return q

    def unsubscribe(self, q):
        with self.lock:
            if q in self.subs:
                self.subs.remove(q)

    def emit(self, ev):
        with self.lock:
            subs = list(self.subs)
            if ev[0] == "exit":
                self.done = True
        for q in subs:
            q.put(ev)

    def pump(self):
        """Read the output (pipes or the PTY) and the exit, for all streams."""
        def reader(fd, name):
            while True:
                try:
                    b = os.read(fd, 32768)
                except OSError:
                    b = b""  # EIO: the terminal's last user closed it
                if not b:
                    break
                self.emit((name, b))
            self.emit((name, None))
        if self.master is not None:
            streams = [(self.master, "pty")]
        else:
            streams = [(self.popen.stdout.fileno(), "stdout"),
                       (self.popen.stderr.fileno(), "stderr")]
        for fd, name in streams:
            threading.Thread(target=reader, args=(fd, name), daemon=True).start()
        self.nstreams = len(streams)
        threading.Thread(target=lambda: self.emit(("exit", self.popen.wait())),
                         daemon=True).start()


class State(fake_http.State):
    def __init__(self, args):
        super().__init__(args, "sbx-fake-e2b-")
        self.snapshots = []
        self.mode = args.mode
        self.domain = args.domain

    def reap(self):
        while True:
            time.sleep(0.5)
            now = time.time()
            with self.lock:
                gone = [s for s in self.sandboxes.values()
                        if s.state == "running" and s.end < now]
            for s in gone:
                if s.auto_pause:
                    s.pause()
                else:
                    self.delete(s.id)

    def delete(self, sid):
        with self.lock:
            s = self.sandboxes.pop(sid, None)
        if s:
            s.kill_all()
            shutil.rmtree(s.dir, ignore_errors=True)
        return s


ST = None


def envelope(obj, flags=0):
    data = json.dumps(obj, separators=(",", ":")).encode()
    return bytes([flags]) + len(data).to_bytes(4, "big") + data


def ftype(mode):
    if pystat.S_ISLNK(mode):
        return "FILE_TYPE_SYMLINK"
    if pystat.S_ISDIR(mode):
        return "FILE_TYPE_DIRECTORY"
    if pystat.S_ISREG(mode):
        return "FILE_TYPE_FILE"
    return "FILE_TYPE_UNSPECIFIED"


def entry_info(sb, hpath):
    st = os.lstat(hpath)
    e = {"name": os.path.basename(hpath), "type": ftype(st.st_mode),
         "path": sb.virtual(hpath), "size": str(st.st_size),
         "mode": pystat.S_IMODE(st.st_mode), "permissions": pystat.filemode(st.st_mode),
         "owner": "root" if SWITCH_USERS and st.st_uid == 0 else USER,
         "group": "root" if SWITCH_USERS and st.st_gid == 0 else USER,
         "modifiedTime": now_iso(st.st_mtime)}
    if pystat.S_ISLNK(st.st_mode):
        e["symlinkTarget"] = sb.virtual(os.readlink(hpath))
    return e


class ConnectError(Exception):
    HTTP = {"not_found": 404, "invalid_argument": 400, "already_exists": 409,
            "internal": 500, "permission_denied": 403, "unauthenticated": 401,
            "deadline_exceeded": 504, "failed_precondition": 400}

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class Handler(fake_http.Handler):
    def count_connection(self):
        with ST.lock:
            ST.connections += 1

    # ---- plumbing (body_chunks, body: fake_http.Handler) -----------------
    def send_json(self, code, obj, headers=None):
        data = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(code)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if getattr(self, "truncate_answer", False) and data:
            # The "truncate" fault on a control plane path: half the
            # answer, then the connection closes.
            self.truncate_answer = False
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)

    def api_error(self, code, message):
        self.send_json(code, {"code": code, "message": message})

    def log_request_body(self, body):
        with ST.lock:
            ST.requests.append({"method": self.command, "path": self.path,
                                "headers": {k.lower(): v for k, v in self.headers.items()
                                            if k.lower() in ("content-type",
                                                             "connect-protocol-version",
                                                             "connect-timeout-ms")},
                                "body": body})

    # ---- dispatch (do_GET, do_POST, do_DELETE, do_PUT: fake_http.Handler) --
    def dispatch(self):
        try:
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            if path.startswith("/_fake/"):
                return self.control(path)
            f = ST.take_fault(path, ("slow",))
            if f:
                time.sleep(f.get("delay_ms", 1000) / 1000.0)
            f = ST.take_fault(path, ("status",), self.command)
            if f:
                self.body()
                return self.send_json(f.get("status", 503),
                                      f.get("body", {"code": f.get("status", 503),
                                                     "message": "injected"}))
            port, psid = self.port_target()
            if port is not None:
                return self.proxy_port(psid, port, url)
            sid = self.envd_target()
            if sid is not None or self.is_envd_path(path):
                return self.envd(sid, url)
            return self.api(url)
        except (ConnectionError, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def req_user(self):
        """envd's user: HTTP basic auth "<user>:" (rpc.ts), else the default."""
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                name = base64.b64decode(auth[6:]).decode().split(":", 1)[0]
                if name:
                    return name
            except ValueError:
                pass
        return USER

    def is_envd_path(self, path):
        return (path.startswith("/process.") or path.startswith("/filesystem.")
                or path in ("/files", "/health"))

    def port_target(self):
        """(port, sandbox) of a Host "<port>-<id>.<domain>" other than envd's."""
        host = self.headers.get("Host", "").split(":")[0]
        head = host.split(".", 1)[0]
        if "." in host and "-" in head:
            port, sid = head.split("-", 1)
            if port.isdigit() and int(port) != ENVD_PORT and 0 < int(port) < 65536 and \
                    host.split(".", 1)[1] == ST.domain:
                return int(port), sid
        return None, None

    def envd_target(self):
        # CubeProxy routes by Host only (rewrite_phase.lua:139).
        sid = self.headers.get("E2b-Sandbox-Id") if ST.mode == "e2b" else None
        if sid:
            return sid
        host = self.headers.get("Host", "")
        pre = "%d-" % ENVD_PORT
        if host.startswith(pre) and "." in host:
            return host[len(pre):].split(".", 1)[0]
        return None

    def control(self, path):
        if not self.common_control(path, ST):
            self.api_error(404, "no such control endpoint")

    # ---- control plane -------------------------------------------------
    def api(self, url):
        raw = self.body() if self.command in ("POST", "PUT") else b""
        self.truncate_answer = bool(ST.take_fault(url.path, ("truncate",)))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self.api_error(400, "body is not JSON")
        self.log_request_body(body)
        if ST.api_key is not None:
            key = self.headers.get("X-API-Key")
            auth = self.headers.get("Authorization", "")
            if key != ST.api_key and auth != "Bearer " + ST.api_key:
                return self.api_error(401, "Invalid API key")
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        q = urllib.parse.parse_qs(url.query)
        if parts and parts[0] == "v2":
            parts = parts[1:]
            v2 = True
        else:
            v2 = False
        if parts == ["health"]:
            return self.send_json(200, {"message": "ok"})
        if parts == ["sandboxes"] and self.command == "POST":
            return self.create(body or {})
        if parts == ["sandboxes"] and self.command == "GET":
            return self.list(q, v2)
        if ST.mode == "e2b" and not v2:
            if parts == ["snapshots"] and self.command == "GET":
                return self.list_snapshots(q)
            if len(parts) == 2 and parts[0] == "templates" and self.command == "DELETE":
                return self.delete_template(parts[1])
        if len(parts) >= 2 and parts[0] == "sandboxes":
            with ST.lock:
                sb = ST.sandboxes.get(parts[1])
            if not sb:
                return self.api_error(404, "sandbox %s not found" % parts[1])
            rest = parts[2:]
            if not rest and self.command == "GET":
                return self.send_json(200, sb.detail())
            if not rest and self.command == "DELETE":
                ST.delete(sb.id)
                return self.send_json(204, None)
            if rest == ["connect"] and self.command == "POST":
                # /sandboxes/{id}/connect requires timeout (openapi.yml
                # ConnectSandbox); the SDK's /v2 form, newer than the spec
                # copy, may leave it out.
                timeout = (body or {}).get("timeout") if isinstance(body, dict) else None
                if not isinstance(timeout, int) and not (v2 and timeout is None):
                    return self.api_error(400, "timeout is required")
                if ST.mode == "cube":
                    # CubeAPI documents no connect route (cubesandbox
                    # openapi.yml): it serves E2B's shape for a running
                    # sandbox, resuming is /resume's.
                    if sb.state == "paused":
                        return self.api_error(409, "sandbox is paused: resume it")
                resumed = sb.state == "paused"
                if resumed:
                    sb.resume()
                if timeout is not None:
                    sb.end = time.time() + timeout
                return self.send_json(201 if resumed else 200, sb.created(ST.domain))
            if rest == ["resume"] and self.command == "POST" and not v2:
                # Deprecated in E2B, Cube's documented route: 201 Sandbox,
                # 409 when it is already running.
                if not isinstance(body, dict):
                    return self.api_error(400, "body is required")
                timeout = body.get("timeout", 15)
                if not isinstance(timeout, int):
                    return self.api_error(400, "timeout: want an integer")
                if sb.state != "paused":
                    return self.api_error(409, "sandbox %s is already running" % sb.id)
                sb.resume()
                sb.end = time.time() + timeout
                return self.send_json(201, sb.created(ST.domain))
            if rest == ["timeout"] and self.command == "POST":
                if not isinstance(body, dict) or not isinstance(body.get("timeout"), int):
                    return self.api_error(400, "timeout is required")
                sb.end = time.time() + body["timeout"]
                return self.send_json(204, None)
            if rest == ["pause"] and self.command == "POST":
                # SandboxPauseRequest (optional): memory, default true.
                if body is not None and (not isinstance(body, dict) or
                                         not isinstance(body.get("memory", True), bool)):
                    return self.api_error(400, "memory: want a boolean")
                if ST.take_fault(url.path, ("stuck",)):
                    # The service never finishes pausing (the client's
                    # deadline ends the call); the sandbox runs on.
                    time.sleep(30)
                    return self.api_error(500, "pause did not finish")
                if sb.state == "paused":
                    return self.api_error(409, "sandbox %s is already paused" % sb.id)
                sb.pause((body or {}).get("memory", True))
                return self.send_json(204, None)
            if rest == ["snapshots"] and self.command == "POST" and ST.mode == "e2b" \
                    and not v2:
                return self.snapshot(sb, body)
        return self.api_error(404, "no route %s %s" % (self.command, url.path))

    def create(self, body):
        tmpl = body.get("templateID")
        if not isinstance(tmpl, str) or not tmpl:
            return self.api_error(400, "templateID is required")
        timeout = body.get("timeout", 15)
        meta = body.get("metadata") or {}
        if not isinstance(timeout, int) or not isinstance(meta, dict) or \
                not all(isinstance(v, str) for v in meta.values()):
            return self.api_error(400, "bad field types")
        snap = self.find_snapshot(tmpl)
        sb = Sandbox(ST.base, tmpl, meta, timeout, bool(body.get("autoPause")),
                     body.get("envVars"), ST.mode, snap.dir if snap else None)
        with ST.lock:
            ST.sandboxes[sb.id] = sb
        return self.send_json(201, sb.created(ST.domain))

    # ---- snapshots (E2B) ------------------------------------------------
    def find_snapshot(self, ref):
        if ST.mode != "e2b":
            return None
        with ST.lock:
            return next((s for s in ST.snapshots if s.matches(ref)), None)

    def snapshot(self, sb, body):
        # SandboxSnapshotRequest (required): name, optional.
        if not isinstance(body, dict):
            return self.api_error(400, "body is required")
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not name or
                                 any(c in name for c in "/: ")):
            return self.api_error(400, "name: want a template name")
        if sb.state != "running":
            return self.api_error(409, "sandbox %s is %s: snapshots are of running "
                                       "sandboxes" % (sb.id, sb.state))
        old = self.find_snapshot(name) if name else None
        if old:
            # "a new build will be assigned to the existing template"
            old.take(ST.base, sb)
            snap = old
        else:
            snap = Snapshot(ST.base, sb, name)
            with ST.lock:
                ST.snapshots.append(snap)
        return self.send_json(201, snap.info())

    def list_snapshots(self, q):
        sid = (q.get("sandboxID") or [None])[0]
        name = (q.get("name") or [None])[0]
        with ST.lock:
            out = [s.info() for s in ST.snapshots
                   if (sid is None or s.sandbox_id == sid) and
                   (name is None or s.matches(name))]
        return self.send_json(200, out)

    def delete_template(self, ref):
        snap = self.find_snapshot(ref)
        if not snap:
            return self.api_error(404, "template %s not found" % ref)
        with ST.lock:
            ST.snapshots.remove(snap)
        shutil.rmtree(snap.dir, ignore_errors=True)
        return self.send_json(204, None)

    def list(self, q, v2):
        want = {}
        for m in q.get("metadata", []):
            for k, v in urllib.parse.parse_qsl(m):
                want[k] = v
        states = ",".join(q.get("state", ["running"])).split(",")
        with ST.lock:
            sbs = list(ST.sandboxes.values())
        out = [s.detail(full=False) for s in sbs
               if s.state in states and all(s.metadata.get(k) == v for k, v in want.items())]
        if v2 and "limit" in q:
            # paginationLimit (openapi.yml): at most that many, 1 to 100
            try:
                limit = int(q["limit"][0])
            except ValueError:
                return self.api_error(400, "limit must be an integer")
            if not 1 <= limit <= 100:
                return self.api_error(400, "limit must be from 1 to 100")
            out = out[:limit]
        return self.send_json(200, out)

    # ---- envd ----------------------------------------------------------
    def envd(self, sid, url):
        with ST.lock:
            sb = ST.sandboxes.get(sid) if sid else None
        f = ST.take_fault(url.path, ("vanish", "pause"))
        if f and sb:
            if f["kind"] == "vanish":
                ST.delete(sb.id)
                sb = None
            else:
                sb.pause()
        if not sb or sb.state != "running":
            self.body()
            if ST.mode == "cube":
                data = b"<html><body>retcode 310507: sandbox not found</body></html>"
                self.send_response(500)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            return self.send_json(502, {"sandboxId": sid or "",
                                        "message": "The sandbox was not found",
                                        "code": 502})
        if sb.token and self.headers.get("X-Access-Token") != sb.token and \
                url.path != "/health":
            q = urllib.parse.parse_qs(url.query)
            if not (url.path == "/files" and q.get("signature")):
                self.body()
                return self.send_json(401, {"code": 401, "message": "unauthorized access"})
        if url.path == "/health":
            self.body()
            return self.send_json(204, None)
        if url.path == "/files":
            return self.files(sb, url)
        if url.path == "/process.Process/Start":
            return self.start(sb, url.path)
        if url.path == "/process.Process/Connect":
            return self.connect_proc(sb, url.path)
        if url.path == "/process.Process/StreamInput":
            return self.stream_input(sb, url.path)
        raw = self.body()
        try:
            req = json.loads(raw) if raw else {}
        except ValueError:
            return self.connect_error(ConnectError("invalid_argument", "bad JSON"))
        self.log_request_body(req)
        try:
            rpc = url.path[1:]
            fn = RPCS.get(rpc)
            if not fn:
                raise ConnectError("unimplemented", "%s is not implemented" % rpc)
            self.send_json(200, fn(sb, req, self.req_user()))
        except ConnectError as e:
            self.connect_error(e)
        except OSError as e:  # a path that changed under the call: envd's "internal"
            self.connect_error(ConnectError("internal", str(e)))

    def connect_error(self, e):
        self.send_json(ConnectError.HTTP.get(e.code, 500), {"code": e.code, "message": e.message})

    def files(self, sb, url):
        q = urllib.parse.parse_qs(url.query)
        user = (q.get("username") or [USER])[0]
        vpath = (q.get("path") or [""])[0]
        self.log_request_body(None)
        if not vpath:
            self.body()
            return self.api_error(400, "path is required")
        hp = sb.host_path(vpath, user)
        if self.command == "GET":
            # Open first, then serve that file (as envd does): a file
            # removed or renamed meanwhile is still served whole.
            try:
                fh = os.fdopen(os.open(hp, os.O_RDONLY | os.O_NONBLOCK), "rb")
            except FileNotFoundError:
                return self.api_error(404, "path '%s' does not exist" % vpath)
            except IsADirectoryError:
                return self.api_error(400, "path '%s' is a directory" % vpath)
            with fh:
                if pystat.S_ISDIR(os.fstat(fh.fileno()).st_mode):
                    return self.api_error(400, "path '%s' is a directory" % vpath)
                size = os.fstat(fh.fileno()).st_size
                cut = ST.take_fault(url.path, ("cut",))
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if cut and size > 1:
                    # The answer stops half-way (a proxy or envd dying mid-body).
                    self.wfile.write(fh.read(size // 2))
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                left = size  # a file that grows meanwhile: what was announced
                while left:
                    b = fh.read(min(left, 1 << 16))
                    if not b:
                        break
                    self.wfile.write(b)
                    left -= len(b)
            return
        if self.command != "POST":
            return self.api_error(405, "method not allowed")
        ctype = self.headers.get("Content-Type", "")
        if os.path.isdir(hp):
            self.body()
            return self.api_error(400, "path '%s' is a directory" % vpath)
        makedirs_as(os.path.dirname(hp), user)
        if ctype.startswith("multipart/form-data"):
            data = self.multipart_file(ctype, self.body())
            if data is None:
                return self.api_error(400, "no file part")
            with open(hp, "wb") as fh:
                fh.write(data)
        else:
            with open(hp, "wb") as fh:
                for chunk in self.body_chunks():
                    fh.write(chunk)
        chown_new(hp, user)
        return self.send_json(200, [{"name": os.path.basename(hp), "type": "file",
                                     "path": sb.virtual(hp)}])

    @staticmethod
    def multipart_file(ctype, raw):
        bnd = None
        for p in ctype.split(";"):
            p = p.strip()
            if p.startswith("boundary="):
                bnd = p[len("boundary="):].strip('"')
        if not bnd:
            return None
        for part in raw.split(b"--" + bnd.encode()):
            head, sep, data = part.partition(b"\r\n\r\n")
            if sep and b'name="file"' in head:
                return data[:-2] if data.endswith(b"\r\n") else data
        return None

    def read_stream_request(self):
        """The one message of a server-streaming call (an envelope)."""
        raw = self.body()
        ctype = self.headers.get("Content-Type", "")
        if not ctype.startswith("application/connect+json"):
            raise ValueError("a streaming call: want application/connect+json")
        if len(raw) < 5 or int.from_bytes(raw[1:5], "big") != len(raw) - 5:
            raise ValueError("bad envelope")
        return json.loads(raw[5:])

    def stream_head(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/connect+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, b):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.flush()

    # Not "finish": that name is StreamRequestHandler's per-connection hook.
    def end_stream(self, err=None):
        self.chunk(envelope({"error": err} if err else {}, 0x02))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def start(self, sb, path):
        try:
            req = self.read_stream_request()
        except ValueError as e:
            return self.connect_error(ConnectError("invalid_argument", str(e)))
        self.log_request_body(req)
        cut = ST.take_fault(path, ("cut",))
        trunc = ST.take_fault(path, ("truncate",))
        proc_cfg = req.get("process") or {}
        cmd = proc_cfg.get("cmd")
        args = proc_cfg.get("args") or []
        user = self.req_user()
        home = "/root" if user == "root" else "/home/" + USER
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin",
               "HOME": home if NS_WRAP or user == "root" else sb.host_path(home),
               "USER": user, "LOGNAME": user, "E2B_SANDBOX_ID": sb.id}
        uid = uid_of(user)
        env.update(sb.envs)
        env.update(proc_cfg.get("envs") or {})
        cwd = sb.host_path(proc_cfg.get("cwd") or "/home/" + USER)
        pty_cfg = req.get("pty")
        stdin_on = req.get("stdin", True) or pty_cfg is not None
        timeout_ms = int(self.headers.get("Connect-Timeout-Ms") or 0)
        ka = int(self.headers.get("Keepalive-Ping-Interval") or 0)
        self.stream_head()
        finish = self.end_stream

        if not isinstance(cmd, str) or not cmd:
            return finish({"code": "invalid_argument", "message": "process.cmd is required"})
        argv = [cmd] + [str(a) for a in args]
        vcwd = os.path.normpath(proc_cfg.get("cwd") or "/home/" + USER)
        if NS_WRAP:
            if not os.path.isdir(cwd):
                return finish({"code": "invalid_argument",
                               "message": "cwd '%s' does not exist" % vcwd})
            found = which(cmd, env["PATH"]) if "/" not in cmd else sb.host_path(cmd)
            if not found or not os.path.exists(found):
                return finish({"code": "internal", "message":
                               'error starting process: exec: "%s": executable file not found in $PATH' % cmd})
            argv = NS_WRAP + ["/bin/sh", "-c", NS_SCRIPT, sb.dir, vcwd,
                              str(uid) if uid else ""] + argv
        master = None
        try:
            if pty_cfg is not None:
                # A terminal as envd makes one: the command is the session
                # leader with the PTY as its controlling terminal.
                size = pty_cfg.get("size") or {}
                master, slave = os.openpty()
                fcntl.ioctl(slave, termios.TIOCSWINSZ,
                            struct.pack("HHHH", int(size.get("rows") or 24),
                                        int(size.get("cols") or 80), 0, 0))
                try:
                    popen = subprocess.Popen(
                        argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                        start_new_session=True, close_fds=True,
                        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
                finally:
                    os.close(slave)
            else:
                popen = subprocess.Popen(argv, cwd=cwd, env=env,
                                         stdin=subprocess.PIPE if stdin_on else subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         start_new_session=True, close_fds=True)
        except FileNotFoundError:
            if master is not None:
                os.close(master)
            if not os.path.isdir(cwd):
                return finish({"code": "invalid_argument",
                               "message": "cwd '%s' does not exist" % proc_cfg.get("cwd")})
            return finish({"code": "internal", "message":
                           'error starting process: exec: "%s": executable file not found in $PATH' % cmd})
        except PermissionError:
            if master is not None:
                os.close(master)
            return finish({"code": "internal", "message":
                           'error starting process: fork/exec %s: permission denied' % cmd})
        except OSError as e:
            if master is not None:
                os.close(master)
            return finish({"code": "internal", "message": "error starting process: %s" % e})
        proc = Proc(popen, stdin_on, master)
        proc.argv = [cmd] + [str(a) for a in args]
        proc.envs = dict(proc_cfg.get("envs") or {})
        proc.cwd = vcwd
        proc.tag = req.get("tag")
        with sb.lock:
            sb.procs[popen.pid] = proc
        events = proc.subscribe()
        proc.pump()

        def forget():
            popen.wait()
            time.sleep(0.3)  # the last output and the end reach the streams first
            with sb.lock:
                sb.procs.pop(popen.pid, None)
            if master is not None:
                try:
                    os.close(master)
                except OSError:
                    pass
        threading.Thread(target=forget, daemon=True).start()
        try:
            self.follow(proc, events, ka, timeout_ms, cut, trunc)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # dropping the stream leaves the process running
        finally:
            proc.unsubscribe(events)

    def follow(self, proc, events, ka, timeout_ms, cut=None, trunc=None):
        """Stream a process's events (Start and Connect): start, data, end."""
        popen = proc.popen
        deadline = time.time() + timeout_ms / 1000.0 if timeout_ms > 0 else None
        timed_out = False
        data_events = 0
        self.chunk(envelope({"event": {"start": {"pid": popen.pid}}}))
        open_streams = proc.nstreams
        rc = None
        drain_until = None
        while open_streams or rc is None:
            wait = 1.0
            if ka:
                wait = min(wait, ka)
            if deadline and not timed_out:
                wait = max(0.0, min(wait, deadline - time.time()))
            if drain_until:
                wait = max(0.0, min(wait, drain_until - time.time()))
            try:
                kind, val = events.get(timeout=wait)
            except queue.Empty:
                if deadline and not timed_out and time.time() >= deadline:
                    timed_out = True
                    try:
                        popen.kill()
                    except OSError:
                        pass
                elif drain_until and time.time() >= drain_until:
                    break  # children keep the pipes open: do not wait for them
                elif ka:
                    self.chunk(envelope({"event": {"keepalive": {}}}))
                continue
            if kind == "exit":
                rc = val
                drain_until = time.time() + 0.2
            elif val is None:
                open_streams -= 1
            else:
                data_events += 1
                frame = envelope({"event": {"data": {kind: base64.b64encode(val).decode()}}})
                if cut and data_events > cut.get("after", 0):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(frame) // 2, frame[:len(frame) // 2]))
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if trunc and data_events > trunc.get("after", 0):
                    self.chunk(frame[:len(frame) // 2])
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
                self.chunk(frame)
        end = {"exited": rc >= 0, "status": ("exit status %d" % rc) if rc >= 0 else
               "signal: %s" % SIGNAMES.get(-rc, "signal %d" % -rc)}
        end["exitCode"] = rc if rc >= 0 else -1
        if end["exitCode"] == 0:
            del end["exitCode"]  # proto3 JSON omits zero values
        if not end["exited"]:
            del end["exited"]
        self.chunk(envelope({"event": {"end": end}}))
        self.end_stream({"code": "deadline_exceeded", "message": "context deadline exceeded"}
                    if timed_out else None)

    def connect_proc(self, sb, path):
        """process.Process/Connect: follow a running process from now on."""
        try:
            req = self.read_stream_request()
        except ValueError as e:
            return self.connect_error(ConnectError("invalid_argument", str(e)))
        self.log_request_body(req)
        ka = int(self.headers.get("Keepalive-Ping-Interval") or 0)
        try:
            proc = proc_of(sb, req)
        except ConnectError as e:
            self.stream_head()
            return self.end_stream({"code": e.code, "message": e.message})
        events = proc.subscribe()
        self.stream_head()
        if events is None:
            return self.end_stream({"code": "not_found", "message": "process has ended"})
        try:
            self.follow(proc, events, ka, 0)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            proc.unsubscribe(events)

    def stream_input(self, sb, path):
        """process.Process/StreamInput: a client stream of start{process},
        data{input} and keepalive messages, answered once it ends."""
        if not self.headers.get("Content-Type", "").startswith("application/connect+json"):
            return self.connect_error(ConnectError("invalid_argument",
                                                   "want application/connect+json"))
        buf = b""
        proc = None
        err = None
        msgs = []
        for b in self.body_chunks():
            buf += b
            while len(buf) >= 5 and len(buf) >= 5 + int.from_bytes(buf[1:5], "big"):
                n = int.from_bytes(buf[1:5], "big")
                flags, payload, buf = buf[0], buf[5:5 + n], buf[5 + n:]
                if flags & 0x02:
                    continue
                msgs.append(json.loads(payload or b"{}"))
                m = msgs[-1]
                if err:
                    continue
                try:
                    if "start" in m:
                        proc = proc_of(sb, m["start"])
                    elif "data" in m:
                        if proc is None:
                            raise ConnectError("failed_precondition", "no start message")
                        write_input(proc, (m["data"] or {}).get("input") or {})
                except ConnectError as e:
                    err = {"code": e.code, "message": e.message}
        self.log_request_body({"messages": msgs})
        self.stream_head()
        if not err:
            self.chunk(envelope({}))
        self.end_stream(err)

    def proxy_port(self, sid, port, url):
        """A sandbox port through the service's proxy, as E2B's
        <port>-<id>.<domain> (CubeProxy routes the same Host form):
        forwarded to 127.0.0.1:<port>, where the fake's commands listen."""
        with ST.lock:
            sb = ST.sandboxes.get(sid)
        body = self.body() if self.command in ("POST", "PUT") else None
        if not sb or sb.state != "running":
            return self.send_json(502, {"sandboxId": sid, "message": "The sandbox was not found",
                                        "code": 502})
        hdrs = {k: v for k, v in self.headers.items()
                if k.lower() not in ("host", "connection", "transfer-encoding", "content-length")}
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request(self.command, self.path, body=body, headers=hdrs)
            r = c.getresponse()
            data = r.read()
            c.close()
        except OSError:
            return self.send_json(502, {"sandboxId": sid, "port": port, "code": 502,
                                        "message": "The sandbox is running but port is not open"})
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# ---- unary RPCs ---------------------------------------------------------
def proc_of(sb, req):
    """The process a ProcessSelector ({pid} or {tag}) names."""
    sel = req.get("process") or {}
    pid, tag = sel.get("pid"), sel.get("tag")
    with sb.lock:
        if tag is not None:
            p = next((q for q in sb.procs.values() if q.tag == tag), None)
        else:
            p = sb.procs.get(pid)
    if not p or p.popen.poll() is not None:
        raise ConnectError("not_found", "process with %s %s not found" %
                           ("tag" if tag is not None else "pid", tag if tag is not None else pid))
    return p


def write_input(p, inp):
    """ProcessInput: stdin bytes to the pipe, pty bytes to the terminal."""
    if "pty" in inp:
        if p.master is None:
            raise ConnectError("failed_precondition", "the process has no pty")
        data = base64.b64decode(inp.get("pty") or "")
        try:
            while data:
                data = data[os.write(p.master, data):]
        except OSError as e:
            raise ConnectError("internal", "error writing to pty: %s" % e)
        return
    data = base64.b64decode(inp.get("stdin") or "")
    if p.master is not None:
        raise ConnectError("failed_precondition", "the process has a pty: send pty input")
    with p.stdin_lock:
        if not p.stdin_open or p.popen.stdin is None or p.popen.stdin.closed:
            raise ConnectError("failed_precondition", "stdin is closed")
        try:
            p.popen.stdin.write(data)
            p.popen.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise ConnectError("internal", "error writing to stdin: %s" % e)


def rpc_send_input(sb, req, user):
    write_input(proc_of(sb, req), req.get("input") or {})
    return {}


def rpc_close_stdin(sb, req, user):
    p = proc_of(sb, req)
    if p.master is not None:
        raise ConnectError("failed_precondition",
                           "the process has a pty: send Ctrl+D (0x04) instead")
    with p.stdin_lock:
        if p.popen.stdin and not p.popen.stdin.closed:
            try:
                p.popen.stdin.close()
            except OSError:
                pass
    return {}


def rpc_send_signal(sb, req, user):
    p = proc_of(sb, req)
    sig = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM}.get(
        req.get("signal"))
    if sig is None:
        raise ConnectError("invalid_argument", "unknown signal %s" % req.get("signal"))
    try:
        p.popen.send_signal(sig)
    except OSError:
        pass
    return {}


def rpc_update(sb, req, user):
    """Update: the PTY's window size (the foreground group gets SIGWINCH)."""
    p = proc_of(sb, req)
    pty_cfg = req.get("pty")
    if pty_cfg is None:
        return {}
    if p.master is None:
        raise ConnectError("failed_precondition", "the process has no pty")
    size = pty_cfg.get("size") or {}
    fcntl.ioctl(p.master, termios.TIOCSWINSZ,
                struct.pack("HHHH", int(size.get("rows") or 0), int(size.get("cols") or 0), 0, 0))
    return {}


def rpc_list(sb, req, user):
    with sb.lock:
        procs = [(pid, p) for pid, p in sb.procs.items() if p.popen.poll() is None]
    out = []
    for pid, p in procs:
        info = {"pid": pid, "config": {"cmd": p.argv[0], "args": p.argv[1:], "envs": p.envs,
                                       "cwd": p.cwd}}
        if p.tag is not None:
            info["tag"] = p.tag
        out.append(info)
    return {"processes": out}


def need_path(req, key="path"):
    v = req.get(key)
    if not isinstance(v, str) or not v:
        raise ConnectError("invalid_argument", "%s is required" % key)
    return v


def rpc_stat(sb, req, user):
    hp = sb.host_path(need_path(req))
    if not os.path.lexists(hp):
        raise ConnectError("not_found", "file not found: %s" % req["path"])
    return {"entry": entry_info(sb, hp)}


def rpc_make_dir(sb, req, user):
    hp = sb.host_path(need_path(req), user)
    if os.path.isdir(hp):
        raise ConnectError("already_exists", "directory already exists: %s" % req["path"])
    try:
        makedirs_as(hp, user)
    except OSError as e:
        raise ConnectError("internal", "error creating directory: %s" % e)
    return {"entry": entry_info(sb, hp)}


def rpc_move(sb, req, user):
    src = sb.host_path(need_path(req, "source"))
    dst = sb.host_path(need_path(req, "destination"))
    if not os.path.lexists(src):
        raise ConnectError("not_found", "source not found: %s" % req["source"])
    try:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.rename(src, dst)
    except OSError as e:
        raise ConnectError("internal", "error renaming: %s" % e)
    return {"entry": entry_info(sb, dst)}


def rpc_list_dir(sb, req, user):
    hp = sb.host_path(need_path(req))
    depth = int(req.get("depth") or 1)
    if not os.path.isdir(hp):
        raise ConnectError("not_found" if not os.path.lexists(hp) else "invalid_argument",
                           "not a directory: %s" % req["path"])
    out = []

    def walk(d, level):
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return  # removed meanwhile
        for name in names:
            p = os.path.join(d, name)
            try:
                out.append(entry_info(sb, p))
            except OSError:
                continue  # renamed or removed since the listing: as envd, skip it
            if level < depth and os.path.isdir(p) and not os.path.islink(p):
                walk(p, level + 1)
    walk(hp, 1)
    return {"entries": out}


def rpc_remove(sb, req, user):
    hp = sb.host_path(need_path(req))
    if not os.path.lexists(hp):
        raise ConnectError("not_found", "path not found: %s" % req["path"])
    if os.path.isdir(hp) and not os.path.islink(hp):
        shutil.rmtree(hp)
    else:
        os.unlink(hp)
    return {}


RPCS = {
    "process.Process/SendInput": rpc_send_input,
    "process.Process/CloseStdin": rpc_close_stdin,
    "process.Process/SendSignal": rpc_send_signal,
    "process.Process/List": rpc_list,
    "process.Process/Update": rpc_update,
    "filesystem.Filesystem/Stat": rpc_stat,
    "filesystem.Filesystem/MakeDir": rpc_make_dir,
    "filesystem.Filesystem/Move": rpc_move,
    "filesystem.Filesystem/ListDir": rpc_list_dir,
    "filesystem.Filesystem/Remove": rpc_remove,
}


def main():
    global ST, SWITCH_USERS
    fake_http.default_signals()
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--mode", choices=("e2b", "cube"), default="e2b")
    ap.add_argument("--api-key")
    ap.add_argument("--domain", default="e2b.local")
    ap.add_argument("--dir")
    ap.add_argument("--no-namespaces", action="store_true")
    args = ap.parse_args()
    ST = State(args)
    if not args.no_namespaces:
        probe_namespaces()
    SWITCH_USERS = os.geteuid() == 0 and NS_WRAP is not None and "--user" not in NS_WRAP
    srv = fake_http.Server(("127.0.0.1", args.port), Handler)
    threading.Thread(target=ST.reap, daemon=True).start()
    fake_http.serve(srv, ST, args.port_file)


if __name__ == "__main__":
    main()
