"""k8s_router.py - the fake sandbox-router: one loopback port that routes
by the X-Sandbox-* headers (sandbox-router/README.md) to the fake sandboxd
of a Sandbox. HTTP/1.1 requests are reverse-proxied; a connection that
opens with the HTTP/2 preface (gRPC, h2c with prior knowledge) is spliced to
an in-process gRPC proxy that routes each call by the same headers (as gRPC
metadata) to the sandboxd's gRPC port. X-Sandbox-Port 8080 reaches
sandboxd's REST listener, 9090 its gRPC listener; any other port fails to
dial (502)."""
import http.client
import ipaddress
import re
import socket
import struct
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc

import k8s_controller as kc

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
       "upgrade", "host", "authorization", "content-length"}


class CutShort(Exception):
    """A request body that ended before its declared end."""


class RouteError(Exception):
    def __init__(self, code, detail):
        super().__init__(detail)
        self.code, self.detail = code, detail


class Router:
    def __init__(self, store, controller, faults, tokens, require_token=False,
                 allow_loopback=False, retry_ms=50, retries=3):
        self.store = store
        self.controller = controller
        self.faults = faults
        self.tokens = tokens
        self.require_token = require_token
        self.allow_loopback = allow_loopback
        self.retry_ms = retry_ms
        self.retries = retries
        self.conns = {}          # local port of a splice's upstream side -> client socket
        self.conns_lock = threading.Lock()
        self.resets = {}
        self.channels = {}
        self.channels_lock = threading.Lock()
        self.requests = 0

    # -- routing --------------------------------------------------------------
    def validate(self, get):
        sid = get("x-sandbox-id")
        if not sid:
            raise RouteError(400, "X-Sandbox-ID header is required.")
        if len(sid) > 63 or not DNS_LABEL.match(sid):
            raise RouteError(400, "Invalid sandbox ID format.")
        ns = get("x-sandbox-namespace") or "default"
        if len(ns) > 63 or not DNS_LABEL.match(ns):
            raise RouteError(400, "Invalid namespace format.")
        port = get("x-sandbox-port") or "8888"
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise RouteError(400, "Invalid port format.")
        ip = get("x-sandbox-pod-ip")
        if ip:
            try:
                a = ipaddress.ip_address(ip)
            except ValueError:
                raise RouteError(400, "Invalid target IP address.")
            if a.is_link_local or a.is_multicast or a.is_unspecified or \
                    (a.is_loopback and not self.allow_loopback):
                raise RouteError(400, "Invalid target IP address.")
        auth = get("authorization") or ""
        if self.require_token:
            tok = auth[7:].strip() if auth.startswith("Bearer ") else None
            exp = self.tokens.get(tok, False) if tok else False
            if exp is False or (exp is not None and time.time() >= exp):
                raise RouteError(401, "Unauthorized")
        return sid, ns, int(port), get("x-sandbox-uid"), ip

    def _lookup(self, sid, ns, uid):
        with self.store.lock:
            if uid:
                for (p, n, name), o in self.store.objs.items():
                    if p == "sandboxes" and o["metadata"]["uid"] == uid:
                        return o
                return None
            o = self.store.objs.get(("sandboxes", ns, sid))
            # Unclaimed warm-pool sandboxes are routable by UID only.
            if o is not None and kc.WARM_POOL_LABEL in (o["metadata"].get("labels") or {}):
                return None
            return o

    def resolve(self, sid, ns, port, uid, ip):
        """The loopback port of the target, retried as the router retries
        dial failures; RouteError 502 when it stays unreachable."""
        delay = self.retry_ms / 1000.0
        for attempt in range(self.retries + 1):
            o = self._lookup(sid, ns, uid)
            pod = self.controller.pod_for(o["metadata"]["uid"]) if o else None
            if pod is not None and pod.ports and pod.proc and pod.proc.poll() is None:
                if port == 8080:
                    return pod.ports["rest"]
                if port == 9090:
                    return pod.ports["grpc"]
            if attempt < self.retries:
                time.sleep(delay)
                delay *= 2
        raise RouteError(502, "Could not connect to the backend sandbox: %s" % sid)

    # -- gRPC ---------------------------------------------------------------
    def channel(self, port):
        with self.channels_lock:
            ch = self.channels.get(port)
            if ch is None:
                ch = grpc.insecure_channel("127.0.0.1:%d" % port)
                self.channels[port] = ch
            return ch

    def reset_peer(self, peer):
        """TCP-reset the client connection whose splice reaches the gRPC
        proxy from peer ("ipv4:127.0.0.1:PORT")."""
        try:
            port = int(peer.rsplit(":", 1)[1])
        except (ValueError, IndexError):
            return
        done = threading.Event()
        with self.conns_lock:
            s = self.conns.get(port)
            if s is not None:
                self.resets[s] = done
        if s is not None:
            # Wakes the splice's reader without sending anything; the
            # splice then closes the socket with SO_LINGER 0 (a TCP RST).
            # Wait for that, so that nothing the proxy sends after (the
            # stream's cancellation) reaches the client first.
            try:
                s.shutdown(socket.SHUT_RD)
            except OSError:
                pass
            done.wait(10)


def rst(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


class GrpcProxy(grpc.GenericRpcHandler):
    def __init__(self, router):
        self.r = router

    def service(self, details):
        method = details.method
        md = list(details.invocation_metadata)

        def handler(req_iter, ctx):
            return self._forward(method, md, req_iter, ctx)
        return grpc.stream_stream_rpc_method_handler(handler)

    def _forward(self, method, md, req_iter, ctx):
        r = self.r
        r.requests += 1
        d = {}
        for k, v in md:
            d.setdefault(k.lower(), v)
        try:
            target = r.resolve(*r.validate(d.get))
        except RouteError as e:
            code = {400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
                    502: grpc.StatusCode.UNAVAILABLE}.get(e.code, grpc.StatusCode.UNKNOWN)
            ctx.abort(code, e.detail)
        fwd = [(k, v) for k, v in md if k.lower() not in ("authorization", "user-agent", "te",
                                                          "content-type", "host")
               and not k.startswith(":") and not k.lower().startswith("grpc-")]
        short = method.rsplit("/", 1)[-1]
        fault = r.faults.take(("reset", "rst_stream"), short, "router", d.get("x-sandbox-id"))
        left = ctx.time_remaining()
        if left is not None and (left <= 0 or left > 1e7):
            left = None  # no grpc-timeout from the client
        call = r.channel(target).stream_stream(method)(req_iter, metadata=fwd, timeout=left)
        ctx.add_callback(call.cancel)
        n = 0
        try:
            for msg in call:
                yield msg
                n += 1
                if fault and n >= fault.get("after_messages", 2):
                    time.sleep(0.1)  # let what was sent reach the client first
                    if fault["kind"] == "reset":
                        r.reset_peer(ctx.peer())
                    call.cancel()
                    ctx.cancel()  # RST_STREAM on this stream
                    return
            tm = call.trailing_metadata()
            if tm:
                ctx.set_trailing_metadata(tm)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED and not ctx.is_active():
                return
            tm = e.trailing_metadata() if hasattr(e, "trailing_metadata") else None
            if tm:
                ctx.set_trailing_metadata(tm)
            ctx.abort(e.code(), e.details() or "")


# -- HTTP/1.1 -------------------------------------------------------------------
class HttpProxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    router = None

    def log_message(self, *a):
        pass

    def _detail(self, code, detail):
        import json
        body = json.dumps({"detail": detail}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _body_iter(self):
        """The request body as an iterator, and its length (None: chunked).
        A body cut short (fewer bytes than Content-Length, a chunked stream
        that ends before its last chunk) raises CutShort: the proxy then
        aborts the upstream request instead of completing it, as an HTTP
        reverse proxy does, so sandboxd never takes a partial upload for a
        whole one."""
        n = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            def chunks():
                while True:
                    line = self.rfile.readline(1024)
                    try:
                        size = int(line.split(b";")[0].strip(), 16)
                    except ValueError:
                        raise CutShort("chunked request body ended early or is malformed")
                    if size == 0:
                        while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                            pass
                        return
                    b = self.rfile.read(size)
                    if len(b) < size or self.rfile.readline(1024) not in (b"\r\n", b"\n"):
                        raise CutShort("chunked request body ended early")
                    yield b
            return chunks(), None
        if n:
            n = int(n)

            def fixed():
                left = n
                while left > 0:
                    b = self.rfile.read(min(65536, left))
                    if not b:
                        raise CutShort("request body shorter than its Content-Length")
                    left -= len(b)
                    yield b
            return fixed(), n
        return None, 0

    def _proxy(self):
        r = self.router
        if self.path == "/healthz" and not self.headers.get("X-Sandbox-ID"):
            return self._detail_ok()
        r.requests += 1
        try:
            target = r.resolve(*r.validate(lambda k: self.headers.get(k)))
        except RouteError as e:
            body, _ = self._body_iter()
            try:
                for _ in body or ():
                    pass
            except CutShort:
                self.close_connection = True
            return self._detail(e.code, e.detail)
        body, n = self._body_iter()
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        hdrs["X-Forwarded-For"] = self.client_address[0]
        hdrs["X-Forwarded-Host"] = self.headers.get("Host", "")
        hdrs["X-Forwarded-Proto"] = "http"
        if n is not None:
            hdrs["Content-Length"] = str(n)
        up = http.client.HTTPConnection("127.0.0.1", target, timeout=600)
        try:
            up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            up.putheader("Host", "127.0.0.1:%d" % target)
            if n is None:
                up.putheader("Transfer-Encoding", "chunked")
            for k, v in hdrs.items():
                up.putheader(k, v)
            up.endheaders()
            for b in body or ():
                up.send(b"%x\r\n%s\r\n" % (len(b), b) if n is None else b)
            if n is None:
                up.send(b"0\r\n\r\n")
            resp = up.getresponse()
        except CutShort:
            # Abort: sandboxd sees the upload end early, never a whole body.
            try:
                up.sock.shutdown(socket.SHUT_WR)
            except (OSError, AttributeError):
                pass
            up.close()
            self.close_connection = True
            return self._detail(400, "Request body ended early")
        except OSError:
            up.close()
            return self._detail(502, "Could not connect to the backend sandbox: %s"
                                % self.headers.get("X-Sandbox-ID"))
        fault = r.faults.take(("reset",), self.command.lower(), "router",
                              self.headers.get("X-Sandbox-ID"))
        self.send_response_only(resp.status, resp.reason)
        length = resp.getheader("Content-Length")
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        chunked = length is None and self.command != "HEAD" and resp.status not in (204, 304)
        if length is not None:
            self.send_header("Content-Length", length)
        elif chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        try:
            while True:
                b = resp.read1(65536) if self.command != "HEAD" else b""
                if not b:
                    break
                if fault and sent + len(b) > fault.get("after_bytes", 0):
                    cut = max(0, fault.get("after_bytes", 0) - sent)
                    self.wfile.write(b[:cut])
                    self.wfile.flush()
                    time.sleep(0.05)
                    rst(self.connection)
                    self.close_connection = True
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b) if chunked else b)
                sent += len(b)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        finally:
            up.close()

    def _detail_ok(self):
        body = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _proxy


class _Http(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler):
        # never bound: the front listener hands it accepted sockets
        super().__init__(("127.0.0.1", 0), handler, bind_and_activate=False)


def serve(router, host="127.0.0.1", port=0):
    gsrv = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    gsrv.add_generic_rpc_handlers((GrpcProxy(router),))
    gport = gsrv.add_insecure_port("127.0.0.1:0")
    gsrv.start()
    http_srv = _Http(type("BoundProxy", (HttpProxy,), {"router": router}))
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((host, port))
    lsock.listen(256)

    def splice(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def handle(c, addr):
        c.settimeout(10)
        head = b""
        try:
            while True:
                d = c.recv(len(H2_PREFACE), socket.MSG_PEEK)
                if not d:
                    c.close()
                    return
                if len(d) >= len(H2_PREFACE) or not H2_PREFACE.startswith(d):
                    head = d
                    break
                if d == head:
                    time.sleep(0.005)
                head = d
        except OSError:
            c.close()
            return
        c.settimeout(None)
        if head == H2_PREFACE:
            u = socket.create_connection(("127.0.0.1", gport))
            lp = u.getsockname()[1]
            with router.conns_lock:
                router.conns[lp] = c
            t = threading.Thread(target=splice, args=(u, c), daemon=True)
            t.start()
            splice(c, u)
            with router.conns_lock:
                router.conns.pop(lp, None)
                reset = router.resets.pop(c, None)
            if reset:
                rst(c)
                reset.set()
                try:
                    u.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            t.join()
            for s in (c, u):
                try:
                    s.close()
                except OSError:
                    pass
        else:
            http_srv.process_request(c, addr)

    def accept():
        while True:
            try:
                c, addr = lsock.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=handle, args=(c, addr), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return lsock.getsockname()[1], gsrv
