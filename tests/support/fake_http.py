"""fake_http.py - the HTTP plumbing the fake remote services share
(tests/e2b/fake_e2b.py, tests/daytona/fake_daytona.py,
tests/opensandbox/fake_opensandbox.py): the state every fake keeps (its
sandboxes, faults, request log, connection count), the request handler's
base (TCP settings, request bodies, plain or chunked, the control
endpoints /_fake/faults, /_fake/reset and /_fake/stats), the threaded
server, the signal dispositions commands start from, and serving until
SIGTERM with the port written to a file.

A fake imports it with tests/support on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "support"))
"""
import json
import os
import signal
import socket
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    """What every fake keeps, under one lock: its sandboxes (id -> object),
    the faults still to fire, the request log and the connection count.
    A fake adds its own fields and its delete(sid)."""

    def __init__(self, args, prefix):
        self.api_key = args.api_key
        self.base = args.dir or tempfile.mkdtemp(prefix=prefix)
        self.sandboxes = {}
        self.lock = threading.Lock()
        self.faults = []
        self.requests = []
        self.connections = 0

    def take_fault(self, path, kinds, method=None):
        """The first fault of one of kinds whose "match" prefixes path (is
        path, with "exact": true), of the request's "method" when the
        fault names one, and that has "times" left (default 1), counted
        down; or None."""
        with self.lock:
            for f in self.faults:
                m = f.get("match", "")
                if f.get("kind") in kinds and \
                        (path == m if f.get("exact") else path.startswith(m)) \
                        and f.get("method", method) == method \
                        and f.get("times", 1) > 0:
                    f["times"] = f.get("times", 1) - 1
                    return f
        return None


class Handler(BaseHTTPRequestHandler):
    """Base of a fake's handler: HTTP/1.1 keep-alive, TCP_NODELAY, quiet
    unless SBX_FAKE_VERBOSE is set, and the request body read as it comes
    (Content-Length or chunked). A fake counts connections by defining
    count_connection."""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if os.environ.get("SBX_FAKE_VERBOSE"):
            sys.stderr.write("fake: " + fmt % args + "\n")

    def setup(self):
        super().setup()
        # Go and Node servers (envd, the APIs) set TCP_NODELAY: without it
        # Nagle holds each small stream envelope until the client's delayed
        # ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.count_connection()

    def count_connection(self):
        pass

    # GET, POST, DELETE and PUT go to the fake's dispatch (a fake that
    # serves PATCH adds do_PATCH).
    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def read_exactly(self, left):
        """The next `left` bytes of the body, in chunks of at most 64 KiB."""
        while left:
            b = self.rfile.read(min(left, 1 << 16))
            if not b:
                raise ConnectionError("body cut")
            left -= len(b)
            yield b

    def body_chunks(self):
        """The request body in pieces of at most 64 KiB; ConnectionError
        when the client hangs up before its end."""
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            while True:
                line = self.rfile.readline()
                if not line:
                    raise ConnectionError("body cut")
                n = int(line.split(b";")[0].strip(), 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                yield from self.read_exactly(n)
                self.rfile.readline()
        else:
            yield from self.read_exactly(int(self.headers.get("Content-Length") or 0))

    def body(self):
        return b"".join(self.body_chunks())

    def common_control(self, path, st):
        """The control endpoints every fake has, on State st: POST
        /_fake/faults (a JSON array appended to the faults), POST
        /_fake/reset (faults and request log forgotten), GET /_fake/stats.
        False for another path (the fake's own endpoints)."""
        if path == "/_fake/faults":
            faults = json.loads(self.body() or b"[]")
            with st.lock:
                st.faults.extend(faults)
            self.send_json(200, {"ok": True})
            return True
        if path == "/_fake/reset":
            self.body()
            with st.lock:
                st.faults = []
                st.requests = []
            self.send_json(200, {"ok": True})
            return True
        if path == "/_fake/stats":
            with st.lock:
                self.send_json(200, {"connections": st.connections,
                                     "sandboxes": len(st.sandboxes),
                                     "requests": st.requests})
            return True
        return False


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # Clients that hang up (a cancelled exec) are normal here.
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


def default_signals():
    """Commands inherit ignored signals: start them from defaults. SIGPIPE
    stays ignored in the fake itself (Python's own setting: a command that
    stops reading its stdin must not kill the fake); subprocess restores
    it to the default in the commands."""
    for s in range(1, signal.NSIG):
        if s == signal.SIGPIPE:
            continue
        try:
            if signal.getsignal(s) == signal.SIG_IGN:
                signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def serve(srv, state, port_file):
    """Announce srv's port (in port_file, written whole by a rename, or on
    stdout) and serve until SIGTERM or SIGINT, which delete every sandbox
    of state (state.sandboxes, state.delete) first."""
    port = srv.server_address[1]
    if port_file:
        tmp = port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, port_file)
    else:
        print(port, flush=True)

    def stop(*_):
        for sid in list(state.sandboxes):
            state.delete(sid)
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.serve_forever()
