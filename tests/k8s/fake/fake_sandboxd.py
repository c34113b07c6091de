#!/usr/bin/env python3
"""fake_sandboxd.py - a fake of agent-sandbox's sandboxd for the tests: the
process gRPC service (process.proto, package process.v1) and the filesystem
REST API (filesystem.yaml), on two loopback ports, confined to --root-dir.

Behaves as packages/sandboxd does in its "local development" mode
(`sandboxd --root-dir=/tmp/ws`): paths and cwd are resolved against the
root with symlinks evaluated (SanitizePath: an absolute path under the root
has the root stripped, any other path is joined below it; a result outside
the root is PERMISSION_DENIED / 403); commands run as host processes with
the root as their default working directory. This is a test double, not a
sandbox: nothing is isolated.

Process service, as upstream:
  Start      InitEvent{process_id} (a counter of this daemon, not an OS
             pid), then stdout/stderr chunks (at most --stream-chunk-size
             bytes; one "stdout" stream for a PTY), then ExitEvent{exit_code}
             (-1 for a process killed by a signal, as Go's ExitCode()).
             The child has its own process group (a session for a PTY).
             Cancelling the stream kills the child (SIGKILL to the child
             only, as exec.CommandContext): killing the group is the
             client's job (SendSignal).
  Execute    buffered stdout/stderr/exit_code.
  WriteStdin bytes, or eof (closes stdin; for a PTY closes the master's
             writer side the way upstream closes the pty file: further
             input fails). NOT_FOUND for an unknown or finished process.
  SendSignal SIGINT/SIGTERM/SIGKILL to the process group; INVALID_ARGUMENT
             for SIGNAL_UNSPECIFIED.
  ResizeTTY  FAILED_PRECONDITION without a PTY.
  The registry forgets a process when its Start stream ends.
REST (/v1): GET/HEAD /files/{path} (file bytes, or a DirectoryListing for a
  directory), PUT (atomic temp+rename, parents created, ?mode=0NNN, raw or
  multipart "file" part; 204), DELETE (?recursive=; 409 for a non-empty
  directory), /health, /metadata (env vars with --metadata-env-prefix,
  credential-like names withheld).

Test-only knobs (environment): FAKE_SANDBOXD_UNHEALTHY=1 makes /v1/health
answer 503 for ever (a pod that never becomes Ready); FAKE_SANDBOXD_DRAIN_MS
(default 5000, upstream's pipeDrainGrace) is how long Start waits, once the
child has exited, for its stdout/stderr pipes to reach EOF before it closes
them and sends the ExitEvent (a grandchild holding them does not hold the
stream; a PTY is closed at once, as upstream).

Start: fake_sandboxd.py --root-dir D [--grpc-port 0] [--rest-port 0]
       [--port-file F]   (F gets '{"grpc": P, "rest": Q}' once both listen)
Needs python3-grpcio and python3-protobuf (Debian) and protoc
(protobuf-compiler) to compile process.proto at start (the copy the k8s
provider is built from, plugins/k8s/proto/process/v1).
"""
import os
import sys

try:
    import grpc  # noqa: F401
except ImportError:
    # Debian's python3-grpcio is installed for /usr/bin/python3; a python3
    # from elsewhere (pyenv) earlier on PATH does not see it.
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
            and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.stderr.write("fake_sandboxd: python3-grpcio is not installed\n")
    sys.exit(3)

import argparse
import errno
import fcntl
import itertools
import json
import pty as _pty  # noqa: F401  (documents the dependency on openpty)
import queue
import re
import select
import signal
import struct
import subprocess
import tempfile
import termios
import threading
import time
import urllib.parse
from concurrent import futures
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
# The service's definition, read from its one copy in the tree: the
# verbatim upstream file the k8s provider is built from
# (plugins/k8s/proto/SOURCE.txt says where it comes from; the same text as
# shared/specs/agent-sandbox/sandboxd/process.proto). Only the .proto is
# read, no code of the provider.
PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "..", "plugins", "k8s", "proto",
                                          "process", "v1"))


def load_proto():
    """Compile process.proto with protoc into a private directory and import
    the generated process_pb2 (the service's stubs are built by hand below
    with grpc's generic handlers: no grpc_tools needed)."""
    out = tempfile.mkdtemp(prefix="fake-sandboxd-pb-")
    inc = ["-I", PROTO_DIR]
    if not os.path.exists("/usr/include/google/protobuf/empty.proto"):
        # protobuf-compiler without libprotobuf-dev lacks the well-known
        # types; Empty is all process.proto imports (the generated code
        # imports python3-protobuf's own empty_pb2).
        os.makedirs(os.path.join(out, "inc/google/protobuf"))
        with open(os.path.join(out, "inc/google/protobuf/empty.proto"), "w") as f:
            f.write('syntax = "proto3";\npackage google.protobuf;\nmessage Empty {}\n')
        inc += ["-I", os.path.join(out, "inc")]
    subprocess.run(["protoc"] + inc + ["--python_out=" + out,
                    os.path.join(PROTO_DIR, "process.proto")], check=True)
    sys.path.insert(0, out)
    import process_pb2  # noqa: E402
    return process_pb2


pb = None
SERVICE = "process.v1.ProcessService"


class PathEscapes(Exception):
    pass


def sanitize(root, user_path):
    """SanitizePath of packages/sandboxd/pkg/pathutil: the path resolved
    beneath root with symlinks evaluated (for a missing path, on the nearest
    existing ancestor)."""
    root = os.path.realpath(root)
    up = os.path.normpath(user_path) if user_path else "."
    if up == root:
        up = "."
    elif up.startswith(root + "/"):
        up = up[len(root) + 1:]
    joined = os.path.normpath(os.path.join(root, up.lstrip("/")))
    anc, suffix = joined, []
    while not os.path.lexists(anc):
        suffix.insert(0, os.path.basename(anc))
        parent = os.path.dirname(anc)
        if parent == anc:
            raise PathEscapes(user_path)
        anc = parent
    resolved = os.path.join(os.path.realpath(anc), *suffix)
    if resolved != root and not resolved.startswith(root + "/"):
        raise PathEscapes(user_path)
    return resolved


class Proc:
    def __init__(self, pid, popen, stdin_fd, master):
        self.id = pid
        self.popen = popen
        self.stdin_fd = stdin_fd   # pipe writer, or the PTY master
        self.master = master
        self.lock = threading.Lock()

    def write(self, data):
        with self.lock:
            if self.stdin_fd is None:
                raise BrokenPipeError("stdin closed")
            view = memoryview(data)
            while view:
                n = os.write(self.stdin_fd, view)
                view = view[n:]

    def close_stdin(self):
        with self.lock:
            fd, self.stdin_fd = self.stdin_fd, None
        if fd is not None and fd != self.master:
            os.close(fd)

    def signal(self, sig):
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            try:
                self.popen.send_signal(sig)
            except ProcessLookupError:
                pass


class Daemon:
    def __init__(self, root, chunk):
        self.root = os.path.realpath(root)
        self.chunk = chunk
        self.procs = {}
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.start_time = time.time()
        self.ready = os.environ.get("FAKE_SANDBOXD_UNHEALTHY") != "1"
        # upstream's pipeDrainGrace; FAKE_SANDBOXD_DRAIN_MS shortens it for tests
        self.drain_s = int(os.environ.get("FAKE_SANDBOXD_DRAIN_MS") or 5000) / 1000.0

    # -- gRPC ----------------------------------------------------------------
    def _cmd(self, config, context):
        if config is None or not config.command:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "command is required")
        env = None
        if config.env_vars:
            env = dict(os.environ)
            env.update(config.env_vars)
        cwd = self.root
        if config.HasField("cwd") and config.cwd:
            try:
                cwd = sanitize(self.root, config.cwd)
            except PathEscapes:
                context.abort(grpc.StatusCode.PERMISSION_DENIED,
                              "cwd: access denied: path %r: path escapes sandbox root" % config.cwd)
        return list(config.command), env, cwd

    def _spawn_error(self, e, context):
        if isinstance(e, FileNotFoundError):
            context.abort(grpc.StatusCode.NOT_FOUND, "failed to start command: %s" % e)
        if isinstance(e, PermissionError):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "failed to start command: %s" % e)
        context.abort(grpc.StatusCode.INTERNAL, "failed to start command: %s" % e)

    @staticmethod
    def _exit_code(rc):
        return rc if rc >= 0 else -1

    def Start(self, req, context):
        argv, env, cwd = self._cmd(req.config, context)
        use_pty = req.HasField("pty")
        master = None
        try:
            if use_pty:
                master, slave = os.openpty()
                if req.pty.cols > 0 and req.pty.rows > 0:
                    fcntl.ioctl(slave, termios.TIOCSWINSZ,
                                struct.pack("HHHH", req.pty.rows, req.pty.cols, 0, 0))

                def ctty():
                    os.setsid()
                    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
                popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave,
                                         stderr=slave, preexec_fn=ctty, close_fds=True)
                os.close(slave)
                stdin_fd = master
                readers = [(master, "stdout")]
            else:
                popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         process_group=0, close_fds=True)
                stdin_fd = os.dup(popen.stdin.fileno())
                popen.stdin.close()
                readers = [(popen.stdout.fileno(), "stdout"), (popen.stderr.fileno(), "stderr")]
        except OSError as e:
            if master is not None:
                os.close(master)
            self._spawn_error(e, context)
        pid = next(self.ids)
        proc = Proc(pid, popen, stdin_fd, master)
        with self.lock:
            self.procs[pid] = proc
        # Bounded: a client that does not read blocks the readers, then the
        # child on its full pipe; memory stays bounded.
        q = queue.Queue(maxsize=64)
        live = [len(readers)]
        stop = threading.Event()  # give up on the pipes (the grace is over)
        gone = threading.Event()  # the stream has ended: nobody reads q

        def put(item):
            while not gone.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    pass
            return False

        def reader(fd, name):
            # select, so that the stream can give up on a pipe a grandchild
            # still holds; once told to stop, what is already buffered is
            # still read (bounded), as a Go reader racing Close would.
            left = 64
            while left > 0:
                if stop.is_set():
                    left -= 1
                r, _, _ = select.select([fd], [], [], 0 if stop.is_set() else 0.1)
                if not r:
                    if stop.is_set():
                        break
                    continue
                try:
                    b = os.read(fd, self.chunk)
                except OSError:
                    b = b""  # EIO: the PTY's last user closed it
                if not b or not put((name, b)):
                    break
            put((name, None))  # the end of this pipe, even into a full queue

        threads = [threading.Thread(target=reader, args=(fd, name), daemon=True)
                   for fd, name in readers]
        for t in threads:
            t.start()

        def on_done():
            if popen.poll() is None:
                popen.kill()
        context.add_callback(on_done)
        # Upstream: after reaping the child, a PTY is closed at once and
        # pipes get pipeDrainGrace (5 s) to reach EOF, then are closed; a
        # grandchild holding them does not hold the stream.
        grace = 0.0 if use_pty else self.drain_s
        try:
            yield pb.StartResponse(init=pb.InitEvent(process_id=pid))
            exited = None
            while live[0]:
                if exited is None and popen.poll() is not None:
                    exited = time.monotonic()
                if exited is not None and time.monotonic() >= exited + grace:
                    stop.set()
                try:
                    name, b = q.get(timeout=0.05)
                except queue.Empty:
                    continue
                if b is None:
                    live[0] -= 1
                    continue
                if name == "stdout":
                    yield pb.StartResponse(stdout=b)
                else:
                    yield pb.StartResponse(stderr=b)
            rc = popen.wait()
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=self._exit_code(rc)))
        finally:
            stop.set()
            gone.set()
            with self.lock:
                self.procs.pop(pid, None)
            if popen.poll() is None:
                popen.kill()
            popen.wait()
            for t in threads:
                t.join()
            proc.close_stdin()
            if master is not None:
                os.close(master)
            for f in (popen.stdout, popen.stderr):
                if f is not None:
                    f.close()

    def Execute(self, req, context):
        argv, env, cwd = self._cmd(req.config, context)
        try:
            popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     process_group=0)
        except OSError as e:
            self._spawn_error(e, context)
        context.add_callback(lambda: popen.poll() is None and popen.kill())
        out, err = popen.communicate()
        return pb.ExecuteResponse(exit_code=self._exit_code(popen.returncode),
                                  stdout=out, stderr=err)

    def _proc(self, pid, context):
        with self.lock:
            p = self.procs.get(pid)
        if p is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "process %d not found" % pid)
        return p

    def WriteStdin(self, req, context):
        p = self._proc(req.process_id, context)
        if req.HasField("eof"):
            p.close_stdin()
            return pb.WriteStdinResponse()
        if req.input:
            try:
                p.write(req.input)
            except OSError as e:
                context.abort(grpc.StatusCode.INTERNAL, "failed to write stdin: %s" % e)
        return pb.WriteStdinResponse()

    def SendSignal(self, req, context):
        p = self._proc(req.process_id, context)
        sig = {pb.SIGNAL_SIGINT: signal.SIGINT, pb.SIGNAL_SIGTERM: signal.SIGTERM,
               pb.SIGNAL_SIGKILL: signal.SIGKILL}.get(req.signal)
        if sig is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "unsupported or unspecified signal: %d" % req.signal)
        p.signal(sig)
        return pb.SendSignalResponse()

    def ResizeTTY(self, req, context):
        p = self._proc(req.process_id, context)
        if p.master is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "failed to resize TTY: process has no PTY")
        fcntl.ioctl(p.master, termios.TIOCSWINSZ, struct.pack("HHHH", req.rows, req.cols, 0, 0))
        return pb.ResizeTTYResponse()

    def grpc_handler(self):
        u, s = grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler
        m = {
            "Start": s(self.Start, pb.StartRequest.FromString, pb.StartResponse.SerializeToString),
            "Execute": u(self.Execute, pb.ExecuteRequest.FromString,
                         pb.ExecuteResponse.SerializeToString),
            "WriteStdin": u(self.WriteStdin, pb.WriteStdinRequest.FromString,
                            pb.WriteStdinResponse.SerializeToString),
            "SendSignal": u(self.SendSignal, pb.SendSignalRequest.FromString,
                            pb.SendSignalResponse.SerializeToString),
            "ResizeTTY": u(self.ResizeTTY, pb.ResizeTTYRequest.FromString,
                           pb.ResizeTTYResponse.SerializeToString),
        }
        return grpc.method_handlers_generic_handler(SERVICE, m)

    def kill_all(self):
        with self.lock:
            procs = list(self.procs.values())
        for p in procs:
            p.signal(signal.SIGTERM)
        deadline = time.time() + 2
        for p in procs:
            try:
                p.popen.wait(max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.signal(signal.SIGKILL)


CRED = re.compile("TOKEN|SECRET|PASSWORD|CREDENTIAL|KEY")
MODE = re.compile(r"^0[0-7]{3}$")


class RestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    daemon = None
    prefix = "SANDBOX_"

    def log_message(self, *a):
        pass

    def _json(self, code, obj):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _err(self, code, c, msg):
        self._json(code, {"code": c, "message": msg})

    def _no_content(self):
        self.send_response(204)
        self.end_headers()

    def _body(self):
        """The request body, and None or why it is cut short: a body shorter
        than its Content-Length, or a chunked stream that ends (or goes
        wrong) before its last chunk. Go's net/http reports both as
        io.ErrUnexpectedEOF, so upstream's PUT never renames such an
        upload into place."""
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                line = self.rfile.readline(1024)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    self.close_connection = True
                    return b"".join(chunks), "unexpected EOF" if not line else \
                        "malformed chunked encoding"
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                b = self.rfile.read(size)
                chunks.append(b)
                if len(b) < size or self.rfile.readline(1024) not in (b"\r\n", b"\n"):
                    self.close_connection = True
                    return b"".join(chunks), "unexpected EOF"
            return b"".join(chunks), None
        b = self.rfile.read(n) if n else b""
        if len(b) < n:
            self.close_connection = True
            return b, "unexpected EOF"
        return b, None

    def _route(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        return u.path, {k: v[-1] for k, v in q.items()}

    def _target(self, raw):
        try:
            return sanitize(self.daemon.root, urllib.parse.unquote(raw)), True
        except PathEscapes:
            self._err(403, "PERMISSION_DENIED", "path traversal outside sandbox root is forbidden")
            return None, False

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path, q = self._route()
        if path == "/v1/health":
            if not self.daemon.ready:
                return self._err(503, "UNAVAILABLE", "sandboxd is shutting down")
            return self._json(200, {"status": "ok",
                                    "uptime_seconds": int(time.time() - self.daemon.start_time)})
        if path == "/v1/metadata":
            env = {k: v for k, v in os.environ.items()
                   if k.startswith(self.prefix) and not CRED.search(k)}
            return self._json(200, {"env": env})
        if not path.startswith("/v1/files/") and path != "/v1/files":
            return self._err(404, "NOT_FOUND", "no such endpoint")
        raw = path[len("/v1/files/"):] if path.startswith("/v1/files/") else ""
        target, ok = self._target(raw)
        if not ok:
            return
        try:
            st = os.stat(target)
        except FileNotFoundError:
            return self._err(404, "NOT_FOUND", "path does not exist within the sandbox")
        except PermissionError:
            return self._err(403, "PERMISSION_DENIED", "permission denied")
        import stat as pystat
        if pystat.S_ISDIR(st.st_mode):
            return self._listing(raw, target)
        try:
            f = open(target, "rb")
        except PermissionError:
            return self._err(403, "PERMISSION_DENIED", "permission denied")
        with f:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(st.st_size))
            self.send_header("Last-Modified", time.strftime(
                "%a, %d %b %Y %H:%M:%S GMT", time.gmtime(st.st_mtime)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if self.command == "HEAD":
                return
            left = st.st_size
            while left > 0:
                b = f.read(min(65536, left))
                if not b:
                    break
                self.wfile.write(b)
                left -= len(b)

    def _listing(self, raw, target):
        import stat as pystat
        entries = []
        for name in sorted(os.listdir(target)):
            full = os.path.join(target, name)
            try:
                st = os.lstat(full)
                if pystat.S_ISLNK(st.st_mode):
                    # Upstream lists a symlink by its target's type, and
                    # leaves out one that resolves outside the root.
                    st = os.stat(sanitize(self.daemon.root,
                                          os.path.join(urllib.parse.unquote(raw), name)))
            except (OSError, PathEscapes):
                continue
            entries.append({
                "name": name, "size": st.st_size,
                "type": "directory" if pystat.S_ISDIR(st.st_mode) else "file",
                "modified_at": datetime.fromtimestamp(int(st.st_mtime), timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%SZ"),
                "mode": "%04o" % (st.st_mode & 0o777)})
        rel = urllib.parse.unquote(raw)
        if not rel.startswith("/"):
            rel = "/" + rel
        self._json(200, {"path": rel, "entries": entries})

    def do_PUT(self):
        path, q = self._route()
        # first: an answer before it would reset the connection
        try:
            body, short = self._body()
        except OSError:  # reset by the client mid-upload
            self.close_connection = True
            body, short = b"", "unexpected EOF"
        if not path.startswith("/v1/files/"):
            return self._err(404, "NOT_FOUND", "no such endpoint")
        mode = 0o644
        if q.get("mode"):
            if not MODE.match(q["mode"]):
                return self._err(400, "INVALID_ARGUMENT",
                                 "mode %r must match ^0[0-7]{3}$" % q["mode"])
            mode = int(q["mode"], 8)
        target, ok = self._target(path[len("/v1/files/"):])
        if not ok:
            return
        if os.path.isdir(target):
            return self._err(400, "INVALID_ARGUMENT", "target path is a directory")
        ctype = self.headers.get("Content-Type", "")
        if short and ctype.startswith("multipart/form-data"):
            return self._err(400, "INVALID_ARGUMENT", "invalid multipart body: " + short)
        if short:  # upstream: io.Copy into the temporary file fails, it is removed
            return self._err(500, "INTERNAL", "failed to write file contents: " + short)
        if ctype.startswith("multipart/form-data"):
            data = multipart_file(ctype, body)
            if data is None:
                return self._err(400, "INVALID_ARGUMENT",
                                 'multipart body is missing the required "file" part')
            body = data
        try:
            os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".sandboxd-tmp-", dir=os.path.dirname(target))
            try:
                os.fchmod(fd, mode)
                with os.fdopen(fd, "wb") as f:
                    f.write(body)
                    f.flush()
                    os.fsync(f.fileno())
                os.rename(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except PermissionError:
            return self._err(403, "PERMISSION_DENIED", "permission denied")
        except OSError as e:
            return self._err(500, "INTERNAL", str(e))
        self._no_content()

    def do_DELETE(self):
        path, q = self._route()
        if not path.startswith("/v1/files/"):
            return self._err(404, "NOT_FOUND", "no such endpoint")
        target, ok = self._target(path[len("/v1/files/"):])
        if not ok:
            return
        if not os.path.lexists(target):
            return self._err(404, "NOT_FOUND", "path does not exist within the sandbox")
        rec = q.get("recursive", "")
        if rec not in ("", "true", "false", "1", "0", "True", "False", "t", "f", "T", "F",
                       "TRUE", "FALSE"):
            return self._err(400, "INVALID_ARGUMENT", "recursive %r must be a boolean" % rec)
        recursive = rec in ("true", "1", "True", "t", "T", "TRUE")
        import shutil
        try:
            if target == self.daemon.root:
                if not recursive:
                    return self._err(409, "CONFLICT", "cannot delete the sandbox root; "
                                     "pass recursive=true to clear its contents")
                for name in os.listdir(target):
                    full = os.path.join(target, name)
                    if os.path.isdir(full) and not os.path.islink(full):
                        shutil.rmtree(full)
                    else:
                        os.unlink(full)
            elif os.path.isdir(target) and not os.path.islink(target):
                if recursive:
                    shutil.rmtree(target)
                else:
                    os.rmdir(target)
            else:
                os.unlink(target)
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return self._err(409, "CONFLICT",
                                 "directory is not empty; pass recursive=true to remove it")
            if e.errno in (errno.EACCES, errno.EPERM):
                return self._err(403, "PERMISSION_DENIED", "permission denied")
            return self._err(500, "INTERNAL", str(e))
        self._no_content()


def multipart_file(ctype, body):
    import email.parser
    import email.policy
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    for part in msg.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_payload(decode=True) or b""
    return None


def main():
    global pb
    ap = argparse.ArgumentParser()
    ap.add_argument("--root-dir", required=True)
    ap.add_argument("--grpc-port", type=int, default=0)
    ap.add_argument("--rest-port", type=int, default=0)
    ap.add_argument("--listen-host", default="127.0.0.1")
    ap.add_argument("--metadata-env-prefix", default="SANDBOX_")
    ap.add_argument("--stream-chunk-size", type=int, default=4096)
    ap.add_argument("--port-file")
    ap.add_argument("--parent-pid", type=int, default=0,
                    help="exit when this process (the fake controller) is gone")
    a = ap.parse_args()
    os.makedirs(a.root_dir, exist_ok=True)
    pb = load_proto()
    d = Daemon(a.root_dir, a.stream_chunk_size)
    gs = grpc.server(futures.ThreadPoolExecutor(max_workers=64),
                     options=[("grpc.so_reuseport", 0)])
    gs.add_generic_rpc_handlers((d.grpc_handler(),))
    gport = gs.add_insecure_port("%s:%d" % (a.listen_host, a.grpc_port))
    gs.start()
    RestHandler.daemon = d
    RestHandler.prefix = a.metadata_env_prefix
    rs = ThreadingHTTPServer((a.listen_host, a.rest_port), RestHandler)
    rs.daemon_threads = True
    threading.Thread(target=rs.serve_forever, daemon=True).start()
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"grpc": gport, "rest": rs.server_address[1]}, f)
        os.rename(tmp, a.port_file)
    else:
        print(json.dumps({"grpc": gport, "rest": rs.server_address[1]}), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        if a.parent_pid and os.getppid() != a.parent_pid:
            break  # the fake controller that started us died
    d.ready = False
    d.kill_all()
    gs.stop(0.5)
    rs.shutdown()


if __name__ == "__main__":
    main()
