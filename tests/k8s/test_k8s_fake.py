#!/usr/bin/env python3
"""test_k8s_fake.py - the fake cluster (tests/k8s/fake) checked by clients
we did not write: Python grpc (grpcio, HTTP/2) and curl (libcurl's HTTP/2
with prior knowledge, as a C client talks gRPC) through the fake router to
the fake sandboxd, the filesystem REST API through the router, the API
server's semantics (conflicts, 410, selectors, status subresource,
cascades, shutdownTime) and every fault knob. Exit 77 when grpcio, protoc
or curl is missing."""
import os
import sys

try:
    import grpc
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
            and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("skipped: python3-grpcio is not installed")
    sys.exit(77)

import json
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fake"))
for tool in ("protoc", "curl"):
    if shutil.which(tool) is None:
        print("skipped: %s is not installed" % tool)
        sys.exit(77)
import fake_sandboxd  # noqa: E402
from google.protobuf import empty_pb2  # noqa: E402

pb = fake_sandboxd.load_proto()
EXT = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default"
SBX = "/apis/agents.x-k8s.io/v1beta1/namespaces/default"
SVC = "/process.v1.ProcessService/"
INFO = {}
PROC = None


def setUpModule():
    global PROC
    d = tempfile.mkdtemp(prefix="sbx-k8s-fake-test.")
    INFO["dir"] = d
    env = dict(os.environ, FAKE_SANDBOXD_DRAIN_MS="1000")  # upstream's 5 s, shortened
    PROC = subprocess.Popen([sys.executable, os.path.join(HERE, "fake", "fake_k8s.py"),
                             "--dir", d, "--port-file", os.path.join(d, "info"), "--seed"],
                            stdout=subprocess.DEVNULL, env=env)
    for _ in range(1200):  # 60 s: a loaded machine starts it slowly
        if os.path.exists(os.path.join(d, "info")):
            break
        time.sleep(0.05)
    with open(os.path.join(d, "info")) as f:
        INFO.update(json.load(f))
    INFO["ctx"] = ssl.create_default_context(cafile=INFO["ca"])


def tearDownModule():
    PROC.terminate()
    PROC.wait(10)
    shutil.rmtree(INFO["dir"], ignore_errors=True)


def api(method, path, body=None, token=None, ctype="application/json", expect=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(INFO["api"] + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + (token or INFO["token"]))
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, context=INFO["ctx"], timeout=20) as r:
            code, out = r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        code, out = e.code, json.loads(e.read() or b"null")
    if expect is not None and code != expect:
        raise AssertionError("%s %s: %d %s" % (method, path, code, out))
    return code, out


def control(path, body=None):
    req = urllib.request.Request(INFO["api"] + "/_fake/" + path, method="POST",
                                 data=json.dumps(body if body is not None else {}).encode())
    with urllib.request.urlopen(req, context=INFO["ctx"], timeout=10) as r:
        return json.loads(r.read())


def claim(name, **spec):
    s = {"warmPoolRef": {"name": "sandboxd-pool"}}
    s.update(spec)
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
            "metadata": {"name": name, "labels": {"test": "k8s-fake"}}, "spec": s}


def ready(obj):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return c
    return {}


def wait_claim(name, timeout=20.0, want="True"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        code, o = api("GET", EXT + "/sandboxclaims/" + name)
        if code == 200 and ready(o).get("status") == want:
            return o
        time.sleep(0.05)
    raise AssertionError("claim %s not Ready=%s: %s" % (name, want, o))


class Grpc:
    def __init__(self, sandbox, port="9090"):
        target = INFO["router"].split("//")[1]
        self.ch = grpc.insecure_channel(target)
        self.md = [("x-sandbox-id", sandbox), ("x-sandbox-namespace", "default"),
                   ("x-sandbox-port", port)]

    def unary(self, name, req, resp):
        return self.ch.unary_unary(SVC + name, req.SerializeToString, resp.FromString)

    def execute(self, argv, **kw):
        return self.unary("Execute", pb.ExecuteRequest, pb.ExecuteResponse)(
            pb.ExecuteRequest(config=pb.ProcessConfig(command=argv, **kw)), metadata=self.md,
            timeout=20)

    def start(self, argv, pty=None, timeout=20, **kw):
        req = pb.StartRequest(config=pb.ProcessConfig(command=argv, **kw))
        if pty:
            req.pty.CopyFrom(pb.PTY(cols=pty[0], rows=pty[1]))
        return self.ch.unary_stream(SVC + "Start", pb.StartRequest.SerializeToString,
                                    pb.StartResponse.FromString)(req, metadata=self.md,
                                                                 timeout=timeout)

    def stdin(self, pid, data=None):
        r = pb.WriteStdinRequest(process_id=pid)
        if data is None:
            r.eof.CopyFrom(empty_pb2.Empty())
        else:
            r.input = data
        return self.unary("WriteStdin", pb.WriteStdinRequest, pb.WriteStdinResponse)(
            r, metadata=self.md, timeout=10)

    def signal(self, pid, sig):
        return self.unary("SendSignal", pb.SendSignalRequest, pb.SendSignalResponse)(
            pb.SendSignalRequest(process_id=pid, signal=sig), metadata=self.md, timeout=10)

    def resize(self, pid, cols, rows):
        return self.unary("ResizeTTY", pb.ResizeTTYRequest, pb.ResizeTTYResponse)(
            pb.ResizeTTYRequest(process_id=pid, cols=cols, rows=rows), metadata=self.md, timeout=10)


def rest(sandbox, method, path, data=None, headers=None):
    req = urllib.request.Request(INFO["router"] + path, data=data, method=method)
    req.add_header("X-Sandbox-ID", sandbox)
    req.add_header("X-Sandbox-Port", "8080")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Base(unittest.TestCase):
    sandbox = None

    @classmethod
    def setUpClass(cls):
        if Base.sandbox is None:
            api("POST", EXT + "/sandboxclaims", claim("proc-claim"), expect=201)
            Base.sandbox = wait_claim("proc-claim")["status"]["sandbox"]["name"]

    def setUp(self):
        control("reset")


class ProcessService(Base):
    def test_execute(self):
        r = Grpc(self.sandbox).execute(["sh", "-c", "echo out; echo err >&2; exit 3"])
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, b"out\n", b"err\n"))

    def test_execute_env_and_cwd(self):
        g = Grpc(self.sandbox)
        g.execute(["mkdir", "-p", "sub"])
        r = g.execute(["sh", "-c", "echo $FOO; pwd"], env_vars={"FOO": "bar"}, cwd="sub")
        self.assertEqual(r.stdout.decode().split("\n")[0], "bar")
        self.assertTrue(r.stdout.decode().strip().endswith("/workspace/sub"))

    def test_cwd_escaping_root_is_permission_denied(self):
        with self.assertRaises(grpc.RpcError) as e:
            Grpc(self.sandbox).execute(["true"], cwd="../..")
        self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        # an absolute path outside the root is taken below it (SanitizePath)
        r = Grpc(self.sandbox).execute(["pwd"], cwd="/")
        self.assertTrue(r.stdout.strip().endswith(b"/workspace"))

    def test_cwd_through_symlink_out_is_denied(self):
        g = Grpc(self.sandbox)
        g.execute(["ln", "-sfn", "/etc", "evil"])
        with self.assertRaises(grpc.RpcError) as e:
            g.execute(["true"], cwd="evil")
        self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)

    def test_missing_command(self):
        with self.assertRaises(grpc.RpcError) as e:
            Grpc(self.sandbox).execute(["/no/such/binary"])
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as e:
            Grpc(self.sandbox).execute([])
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_start_streams_then_exit(self):
        evs = list(Grpc(self.sandbox).start(["sh", "-c", "echo a; sleep 0.2; echo b >&2; exit 7"]))
        self.assertTrue(evs[0].HasField("init") and evs[0].init.process_id > 0)
        self.assertEqual(b"".join(e.stdout for e in evs if e.WhichOneof("event") == "stdout"), b"a\n")
        self.assertEqual(b"".join(e.stderr for e in evs if e.WhichOneof("event") == "stderr"), b"b\n")
        self.assertEqual(evs[-1].exit.exit_code, 7)

    def test_output_is_chunked_and_complete(self):
        evs = list(Grpc(self.sandbox).start(["head", "-c", "1000000", "/dev/zero"]))
        outs = [e.stdout for e in evs if e.WhichOneof("event") == "stdout"]
        self.assertEqual(sum(map(len, outs)), 1000000)
        self.assertLessEqual(max(map(len, outs)), 4096)

    def test_stdin_and_eof(self):
        g = Grpc(self.sandbox)
        it = g.start(["cat"])
        pid = next(it).init.process_id
        g.stdin(pid, b"hello\n")
        self.assertEqual(next(it).stdout, b"hello\n")
        g.stdin(pid)
        rest = list(it)
        self.assertEqual(rest[-1].exit.exit_code, 0)
        with self.assertRaises(grpc.RpcError) as e:
            g.stdin(pid, b"late")
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_signal_reaches_the_group(self):
        g = Grpc(self.sandbox)
        it = g.start(["sh", "-c", "sleep 30 & sleep 30; echo never"])
        pid = next(it).init.process_id
        t0 = time.time()
        g.signal(pid, pb.SIGNAL_SIGKILL)
        evs = list(it)
        self.assertEqual(evs[-1].exit.exit_code, -1)
        self.assertLess(time.time() - t0, 5)  # the background sleep held no pipe open
        with self.assertRaises(grpc.RpcError) as e:
            g.signal(pid, pb.SIGNAL_SIGTERM)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_grandchild_holding_the_pipes(self):
        # upstream: once the child is reaped, the pipes get pipeDrainGrace
        # (FAKE_SANDBOXD_DRAIN_MS here) to reach EOF, then the stream ends
        t0 = time.time()
        evs = list(Grpc(self.sandbox).start(["sh", "-c", "sleep 20 & echo $!; echo hi"]))
        took = time.time() - t0
        out = b"".join(e.stdout for e in evs if e.HasField("stdout")).split()
        os.kill(int(out[0]), 9)  # the sleep this test started
        self.assertEqual(out[1:], [b"hi"])
        self.assertEqual(evs[-1].exit.exit_code, 0)
        self.assertGreater(took, 0.9)
        self.assertLess(took, 5)

    def test_unspecified_signal(self):
        g = Grpc(self.sandbox)
        it = g.start(["sleep", "30"])
        pid = next(it).init.process_id
        with self.assertRaises(grpc.RpcError) as e:
            g.signal(pid, pb.SIGNAL_UNSPECIFIED)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        g.signal(pid, pb.SIGNAL_SIGTERM)
        self.assertEqual(list(it)[-1].exit.exit_code, -1)

    def test_pty_size_resize_and_input(self):
        g = Grpc(self.sandbox)
        it = g.start(["sh", "-c", "stty size; tty; read x; stty size; echo got $x"], pty=(80, 24))
        pid = next(it).init.process_id
        out = b""
        while b"/dev/pts/" not in out:
            out += next(it).stdout
        self.assertIn(b"24 80", out)
        g.resize(pid, 100, 40)
        g.stdin(pid, b"zz\n")
        for e in it:
            if e.WhichOneof("event") == "stdout":
                out += e.stdout
            last = e
        self.assertIn(b"40 100", out)
        self.assertIn(b"got zz", out)
        self.assertEqual(last.exit.exit_code, 0)

    def test_resize_without_pty(self):
        g = Grpc(self.sandbox)
        it = g.start(["sleep", "30"])
        pid = next(it).init.process_id
        with self.assertRaises(grpc.RpcError) as e:
            g.resize(pid, 10, 10)
        self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        g.signal(pid, pb.SIGNAL_SIGKILL)
        list(it)

    def test_cancel_kills_the_process(self):
        g = Grpc(self.sandbox)
        mark = "cancel-%d" % os.getpid()
        it = g.start(["sh", "-c", "exec sleep 31 # " + mark])
        next(it)
        it.cancel()
        deadline = time.time() + 5
        while time.time() < deadline:
            r = g.execute(["sh", "-c", "ps -eo args | grep -c '[s]leep 31'"])
            if r.stdout.strip() == b"0":
                break
            time.sleep(0.1)
        self.assertEqual(r.stdout.strip(), b"0")

    def test_deadline_kills_the_process(self):
        g = Grpc(self.sandbox)
        with self.assertRaises(grpc.RpcError) as e:
            list(g.start(["sleep", "32"], timeout=0.5))
        self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_flood_stays_bounded(self):
        # A reader that stops reading: the fake's buffers are bounded, so
        # its memory does not grow with the output.
        g = Grpc(self.sandbox)
        it = g.start(["cat", "/dev/zero"])
        pid = next(it).init.process_id
        time.sleep(1.0)
        pods = control_stats()["controller"]["pods"]
        rss = sandboxd_rss(self.sandbox, pods)
        time.sleep(1.0)
        self.assertLess(sandboxd_rss(self.sandbox, pods) - rss, 20 << 20)
        g.signal(pid, pb.SIGNAL_SIGKILL)
        it.cancel()

    def test_router_header_errors(self):
        for md, code in (([], grpc.StatusCode.INVALID_ARGUMENT),
                         ([("x-sandbox-id", "a.b")], grpc.StatusCode.INVALID_ARGUMENT),
                         ([("x-sandbox-id", "no-such-sandbox"), ("x-sandbox-port", "9090")],
                          grpc.StatusCode.UNAVAILABLE)):
            g = Grpc(self.sandbox)
            g.md = md
            with self.assertRaises(grpc.RpcError) as e:
                g.execute(["true"])
            self.assertEqual(e.exception.code(), code)

    def test_libcurl_http2_prior_knowledge(self):
        # What a C client does: libcurl over h2c, one length-prefixed
        # protobuf message, the status in the trailers.
        msg = pb.ExecuteRequest(config=pb.ProcessConfig(command=["echo", "via-curl"])).SerializeToString()
        d = tempfile.mkdtemp()
        body = os.path.join(d, "req")
        with open(body, "wb") as f:
            f.write(b"\0" + struct.pack(">I", len(msg)) + msg)
        p = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-X", "POST",
                            "-H", "Content-Type: application/grpc", "-H", "TE: trailers",
                            "-H", "X-Sandbox-ID: " + self.sandbox, "-H", "X-Sandbox-Port: 9090",
                            "--data-binary", "@" + body, "-D", os.path.join(d, "hdr"),
                            "-o", os.path.join(d, "out"), "-v",
                            INFO["router"] + SVC + "Execute"], capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(d, "out"), "rb") as f:
            raw = f.read()
        self.assertEqual(raw[0], 0)
        n = struct.unpack(">I", raw[1:5])[0]
        r = pb.ExecuteResponse.FromString(raw[5:5 + n])
        self.assertEqual(r.stdout, b"via-curl\n")
        with open(os.path.join(d, "hdr"), "rb") as f:
            hdr = f.read().lower()
        self.assertIn(b"http/2 200", hdr)
        self.assertIn(b"grpc-status: 0", hdr)  # curl -D includes the trailers
        shutil.rmtree(d)


def control_stats():
    req = urllib.request.Request(INFO["api"] + "/_fake/stats")
    with urllib.request.urlopen(req, context=INFO["ctx"], timeout=10) as r:
        return json.loads(r.read())


def sandboxd_rss(name, pods):
    root = next(p["root"] for p in pods if p["sandbox"] == name)
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
            if b"fake_sandboxd.py" in cmd and root.encode() in cmd:
                with open("/proc/%s/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            return int(line.split()[1]) * 1024
        except OSError:
            continue
    raise AssertionError("no sandboxd for " + name)


class RouterFaults(Base):
    def test_reset_mid_output(self):
        control("faults", [{"kind": "reset", "resource": "router", "verb": "Start",
                            "after_messages": 3}])
        g = Grpc(self.sandbox)
        got = []
        with self.assertRaises(grpc.RpcError) as e:
            for ev in g.start(["sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.1; done"]):
                got.append(ev)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertGreaterEqual(len(got), 2)
        self.assertFalse(any(ev.HasField("exit") for ev in got))
        # the next call works again (UNAVAILABLE is retryable: the channel
        # may first try the connection that was reset)
        for attempt in range(5):
            try:
                self.assertEqual(g.execute(["true"]).exit_code, 0)
                break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or attempt == 4:
                    raise
                time.sleep(0.2)

    def test_rst_stream_mid_output(self):
        control("faults", [{"kind": "rst_stream", "resource": "router", "verb": "Start",
                            "after_messages": 2}])
        g = Grpc(self.sandbox)
        with self.assertRaises(grpc.RpcError) as e:
            list(g.start(["sh", "-c", "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done"]))
        self.assertIn(e.exception.code(), (grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL,
                                           grpc.StatusCode.UNAVAILABLE))

    def test_http_reset_mid_body(self):
        data = os.urandom(300000)
        self.assertEqual(rest(self.sandbox, "PUT", "/v1/files/big.bin", data)[0], 204)
        control("faults", [{"kind": "reset", "resource": "router", "verb": "get",
                            "after_bytes": 100000}])
        with self.assertRaises((ConnectionError, OSError, Exception)):
            code, body = rest(self.sandbox, "GET", "/v1/files/big.bin")
            if len(body) == len(data):
                raise AssertionError("not cut")
            raise ConnectionError("cut")
        self.assertEqual(rest(self.sandbox, "GET", "/v1/files/big.bin")[1], data)


class Filesystem(Base):
    def test_write_read_list_delete(self):
        s = self.sandbox
        self.assertEqual(rest(s, "PUT", "/v1/files/d/e/f.txt?mode=0600", b"xyz")[0], 204)
        self.assertEqual(rest(s, "GET", "/v1/files/d/e/f.txt"), (200, b"xyz"))
        code, body = rest(s, "GET", "/v1/files/d/e")
        lst = json.loads(body)
        self.assertEqual(lst["path"], "/d/e")
        self.assertEqual([(e["name"], e["type"], e["size"], e["mode"]) for e in lst["entries"]],
                         [("f.txt", "file", 3, "0600")])
        self.assertEqual(rest(s, "DELETE", "/v1/files/d")[0], 409)
        self.assertEqual(rest(s, "DELETE", "/v1/files/d?recursive=true")[0], 204)
        self.assertEqual(rest(s, "GET", "/v1/files/d")[0], 404)
        self.assertEqual(rest(s, "HEAD", "/v1/files/nope")[0], 404)

    def _cut_short(self, path, head, sent):
        """A PUT through the router whose body stops early: the client
        half-closes after sent bytes."""
        c = socket.create_connection((INFO["router"].split("//")[1].split(":")[0],
                                      int(INFO["router"].rsplit(":", 1)[1])), timeout=10)
        c.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nX-Sandbox-ID: %s\r\n"
                   "X-Sandbox-Port: 8080\r\n%s\r\n" % (path, self.sandbox, head)).encode()
                  + sent)
        c.shutdown(socket.SHUT_WR)
        try:
            answer = c.recv(4096)
        except OSError:
            answer = b""
        c.close()
        return answer

    def test_cut_short_upload_is_not_saved(self):
        s = self.sandbox
        self.assertEqual(rest(s, "PUT", "/v1/files/cut.txt", b"old")[0], 204)
        for head, sent in (("Content-Length: 100\r\n", b"0123456789"),
                           ("Transfer-Encoding: chunked\r\n", b"a\r\n01234"),
                           ("Transfer-Encoding: chunked\r\n", b"5\r\n01234\r\n")):
            answer = self._cut_short("/v1/files/cut.txt", head, sent)
            self.assertFalse(answer.startswith(b"HTTP/1.1 204"), (head, answer))
            time.sleep(0.2)  # sandboxd finishes with it
            self.assertEqual(rest(s, "GET", "/v1/files/cut.txt"), (200, b"old"), head)
        names = [e["name"] for e in json.loads(rest(s, "GET", "/v1/files/")[1])["entries"]]
        self.assertFalse([n for n in names if n.startswith(".sandboxd-tmp-")], names)

    def test_bad_mode_and_directory_target(self):
        s = self.sandbox
        self.assertEqual(rest(s, "PUT", "/v1/files/m.txt?mode=777", b"x")[0], 400)
        rest(s, "PUT", "/v1/files/dd/x", b"x")
        self.assertEqual(rest(s, "PUT", "/v1/files/dd", b"x")[0], 400)

    def test_traversal_and_symlinks_are_403(self):
        s = self.sandbox
        Grpc(s).execute(["ln", "-sfn", "/etc", "out"])
        self.assertEqual(rest(s, "GET", "/v1/files/out/passwd")[0], 403)
        self.assertEqual(rest(s, "PUT", "/v1/files/out/planted", b"x")[0], 403)
        self.assertFalse(os.path.exists("/etc/planted"))
        self.assertEqual(rest(s, "GET", "/v1/files/%2e%2e/%2e%2e/etc/passwd")[0], 403)
        # a symlink leading out is left out of the listing
        names = [e["name"] for e in json.loads(rest(s, "GET", "/v1/files/")[1])["entries"]]
        self.assertNotIn("out", names)

    def test_multipart_upload(self):
        s = self.sandbox
        b = "XbOuNdArY"
        body = ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\nmulti\r\n--%s--\r\n" % (b, b)).encode()
        self.assertEqual(rest(s, "PUT", "/v1/files/mp.txt", body,
                              {"Content-Type": "multipart/form-data; boundary=" + b})[0], 204)
        self.assertEqual(rest(s, "GET", "/v1/files/mp.txt")[1], b"multi")

    def test_files_and_commands_share_the_workspace(self):
        s = self.sandbox
        rest(s, "PUT", "/v1/files/shared.txt", b"both")
        self.assertEqual(Grpc(s).execute(["cat", "shared.txt"]).stdout, b"both")

    def test_health_and_metadata(self):
        self.assertEqual(json.loads(rest(self.sandbox, "GET", "/v1/health")[1])["status"], "ok")
        env = json.loads(rest(self.sandbox, "GET", "/v1/metadata")[1])["env"]
        self.assertEqual(env["SANDBOX_NAME"], self.sandbox)


class ApiServer(unittest.TestCase):
    def setUp(self):
        control("reset")

    def test_unauthorized(self):
        self.assertEqual(api("GET", EXT + "/sandboxclaims", token="wrong")[0], 401)
        control("token", {"token": "short-lived", "ttl": 0.3})
        self.assertEqual(api("GET", EXT + "/sandboxclaims", token="short-lived")[0], 200)
        time.sleep(0.4)
        self.assertEqual(api("GET", EXT + "/sandboxclaims", token="short-lived")[0], 401)

    def test_serviceaccount_rotation(self):
        sa = INFO["serviceaccount"]
        with open(os.path.join(sa, "token")) as f:
            old = f.read()
        self.assertEqual(api("GET", EXT + "/sandboxclaims", token=old)[0], 200)
        new = control("token", {"rotate": True, "grace": 0.5})["token"]
        with open(os.path.join(sa, "token")) as f:
            self.assertEqual(f.read(), new)
        self.assertEqual(api("GET", EXT + "/sandboxclaims", token=old)[0], 200)  # grace
        time.sleep(0.6)
        self.assertEqual(api("GET", EXT + "/sandboxclaims", token=old)[0], 401)
        self.assertEqual(api("GET", EXT + "/sandboxclaims", token=new)[0], 200)
        INFO["token"] = new  # the other tests go on with the new token
        self.assertTrue(os.path.exists(os.path.join(sa, "ca.crt")))

    def test_discovery(self):
        self.assertEqual(api("GET", "/apis")[1]["kind"], "APIGroupList")
        rl = api("GET", "/apis/extensions.agents.x-k8s.io/v1beta1")[1]
        names = {r["name"] for r in rl["resources"]}
        self.assertTrue({"sandboxclaims", "sandboxclaims/status", "sandboxwarmpools",
                         "sandboxtemplates"} <= names)
        self.assertEqual(api("GET", "/apis/agents.x-k8s.io/v1beta1")[1]["resources"][0]["kind"],
                         "Sandbox")

    def test_create_conflicts_and_status_subresource(self):
        # On a template: the fake controller never writes those, so the
        # resourceVersions below move only with this test's writes.
        T = EXT + "/sandboxtemplates"
        t = {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
             "metadata": {"name": "conflict-tmpl"},
             "spec": {"podTemplate": {"spec": {"containers": [{"name": "c"}]}}},
             "status": {"x": 1}}
        code, o = api("POST", T, t, expect=201)
        self.assertNotIn("status", o)  # status is only written through /status
        code, e = api("POST", T, t)
        self.assertEqual((code, e["reason"]), (409, "AlreadyExists"))
        stale = dict(o)
        stale["metadata"] = dict(o["metadata"], labels={"x": "1"})
        api("PUT", T + "/conflict-tmpl", stale, expect=200)
        code, e = api("PUT", T + "/conflict-tmpl", stale)  # stale now
        self.assertEqual((code, e["reason"]), (409, "Conflict"))
        nrv = dict(o)
        nrv["metadata"] = {k: v for k, v in o["metadata"].items() if k != "resourceVersion"}
        self.assertEqual(api("PUT", T + "/conflict-tmpl", nrv)[0], 422)
        code, e = api("PATCH", T + "/conflict-tmpl",
                      {"metadata": {"resourceVersion": o["metadata"]["resourceVersion"],
                                    "labels": {"y": "2"}}},
                      ctype="application/merge-patch+json")
        self.assertEqual(code, 409)
        code, p = api("PATCH", T + "/conflict-tmpl", {"metadata": {"labels": {"y": "2"}}},
                      ctype="application/merge-patch+json", expect=200)
        self.assertEqual(p["metadata"]["labels"], {"x": "1", "y": "2"})
        self.assertGreater(int(p["metadata"]["resourceVersion"]), int(o["metadata"]["resourceVersion"]))
        code, p2 = api("PATCH", T + "/conflict-tmpl", [{"op": "add", "path": "/metadata/labels/z",
                                                        "value": "3"}],
                       ctype="application/json-patch+json", expect=200)
        self.assertEqual(p2["metadata"]["labels"]["z"], "3")
        # a field the schema does not know is pruned, with a warning; refused
        # with fieldValidation=Strict; a schema violation is 422
        bad = {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
               "metadata": {"name": "pruned-tmpl"},
               "spec": {"podTemplate": {"spec": {"containers": [{"name": "c"}]}}, "bogus": 1}}
        self.assertEqual(api("POST", T + "?fieldValidation=Strict", bad)[0], 400)
        code, pr = api("POST", T, bad, expect=201)
        self.assertNotIn("bogus", pr["spec"])
        log = control_stats()["requests"]
        self.assertEqual([r["warnings"] for r in log if r["verb"] == "create"
                          and r["name"] == "pruned-tmpl" and r["code"] == 201],
                         [['unknown field "spec.bogus"']])
        api("DELETE", T + "/pruned-tmpl", expect=200)
        del bad["spec"]["podTemplate"]
        code, e = api("POST", T, bad)
        self.assertEqual((code, e["reason"]), (422, "Invalid"))
        self.assertIn("spec.podTemplate: Required value", e["message"])
        self.assertEqual(api("PATCH", T + "/conflict-tmpl", {},
                             ctype="application/strategic-merge-patch+json")[0], 415)
        api("DELETE", T + "/conflict-tmpl", expect=200)
        self.assertEqual(api("DELETE", T + "/conflict-tmpl")[0], 404)

    def test_status_subresource(self):
        C = EXT + "/sandboxclaims/status-claim"
        api("POST", EXT + "/sandboxclaims", claim("status-claim", warmPoolRef={"name": "nope"}),
            expect=201)
        o = wait_claim("status-claim", want="False")
        o["spec"]["warmPoolRef"]["name"] = "changed"
        o["status"]["sandbox"] = {"name": "written-by-test"}
        code, s1 = api("PUT", C + "/status", o, expect=200)
        self.assertEqual(s1["spec"]["warmPoolRef"]["name"], "nope")  # spec untouched
        self.assertEqual(s1["status"]["sandbox"]["name"], "written-by-test")
        for _ in range(20):  # the controller writes the status too: retry a conflict
            _, cur = api("GET", C)
            stored = cur["status"]
            cur["status"] = {"sandbox": {"name": "ignored"}}
            code, s2 = api("PUT", C, cur)
            if code != 409:
                break
        self.assertEqual(code, 200)
        self.assertEqual(s2["status"], stored)  # the main resource keeps the stored status
        for _ in range(20):
            _, cur = api("GET", C)
            code, e = api("PUT", C + "/status", dict(cur, status={"conditions": [{"type": "Ready"}]}))
            if code != 409:
                break
        self.assertEqual((code, e["reason"]), (422, "Invalid"))  # the condition lacks its fields
        api("DELETE", C, expect=200)

    def test_label_selector(self):
        for n, lab in (("sel-a", "one"), ("sel-b", "two")):
            c = claim(n)
            c["metadata"]["labels"]["sel"] = lab
            api("POST", EXT + "/sandboxclaims", c, expect=201)
        names = lambda q: [o["metadata"]["name"] for o in api("GET", EXT + "/sandboxclaims?labelSelector=" + q)[1]["items"]]  # noqa: E731
        self.assertEqual(names("sel%3Done"), ["sel-a"])
        self.assertEqual(names("sel%20in%20(one,two)"), ["sel-a", "sel-b"])
        self.assertEqual(names("sel!%3Done,sel"), ["sel-b"])
        self.assertEqual(api("GET", EXT + "/sandboxclaims?labelSelector=%3D%3D")[0], 400)
        for n in ("sel-a", "sel-b"):
            api("DELETE", EXT + "/sandboxclaims/" + n, expect=200)

    def test_watch_from_rv_and_410(self):
        _, lst = api("GET", EXT + "/sandboxclaims")
        rv = lst["metadata"]["resourceVersion"]
        api("POST", EXT + "/sandboxclaims", claim("watch-claim"), expect=201)
        wait_claim("watch-claim")
        evs = watch(EXT + "/sandboxclaims?watch=1&fieldSelector=metadata.name%3Dwatch-claim"
                    "&resourceVersion=" + rv, until=lambda e: ready(e["object"]).get("status") == "True")
        self.assertEqual(evs[0]["type"], "ADDED")
        self.assertTrue(all(e["object"]["metadata"]["name"] == "watch-claim" for e in evs))
        control("compact")
        evs = watch(EXT + "/sandboxclaims?watch=1&resourceVersion=" + rv, until=lambda e: True)
        self.assertEqual(evs[0]["type"], "ERROR")
        self.assertEqual(evs[0]["object"]["code"], 410)
        api("DELETE", EXT + "/sandboxclaims/watch-claim", expect=200)

    def test_dropped_watch(self):
        control("faults", [{"kind": "drop_watch", "resource": "sandboxclaims", "after_events": 1}])
        api("POST", EXT + "/sandboxclaims", claim("drop-claim"), expect=201)
        with self.assertRaises(Exception):
            watch(EXT + "/sandboxclaims?watch=1", until=lambda e: False, timeout=5)
        api("DELETE", EXT + "/sandboxclaims/drop-claim", expect=200)

    def test_injected_statuses(self):
        control("faults", [{"kind": "status", "verb": "create", "resource": "sandboxclaims",
                            "status": 429, "retry_after": 2, "times": 2},
                           {"kind": "conflict", "verb": "create", "resource": "sandboxclaims"},
                           {"kind": "status", "verb": "get", "resource": "sandboxclaims",
                            "status": 503}])
        self.assertEqual(api("POST", EXT + "/sandboxclaims", claim("f-claim"))[0], 429)
        self.assertEqual(api("POST", EXT + "/sandboxclaims", claim("f-claim"))[0], 429)
        code, e = api("POST", EXT + "/sandboxclaims", claim("f-claim"))
        self.assertEqual((code, e["reason"]), (409, "AlreadyExists"))
        self.assertEqual(api("POST", EXT + "/sandboxclaims", claim("f-claim"))[0], 201)
        self.assertEqual(api("GET", EXT + "/sandboxclaims/f-claim")[0], 503)
        self.assertEqual(api("GET", EXT + "/sandboxclaims/f-claim")[0], 200)
        api("DELETE", EXT + "/sandboxclaims/f-claim", expect=200)

    def test_never_ready(self):
        control("faults", [{"kind": "never_ready", "name": "stuck-claim"}])
        api("POST", EXT + "/sandboxclaims", claim("stuck-claim"), expect=201)
        time.sleep(1.5)
        o = api("GET", EXT + "/sandboxclaims/stuck-claim")[1]
        self.assertEqual(ready(o).get("status"), "False")
        self.assertEqual(ready(o).get("reason"), "DependenciesNotReady")
        api("DELETE", EXT + "/sandboxclaims/stuck-claim", expect=200)

    def test_never_ready_sandbox(self):
        control("faults", [{"kind": "never_ready", "resource": "sandboxes", "name": "stuck-sb"}])
        sb = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
              "metadata": {"name": "stuck-sb"},
              "spec": {"podTemplate": {"spec": {"containers": [{"name": "sandboxd"}]}}}}
        api("POST", SBX + "/sandboxes", sb, expect=201)
        time.sleep(2)
        o = api("GET", SBX + "/sandboxes/stuck-sb")[1]
        self.assertEqual((ready(o).get("status"), ready(o).get("reason")),
                         ("False", "DependenciesNotReady"))
        api("DELETE", SBX + "/sandboxes/stuck-sb", expect=200)
        self.assertEqual(control_stats()["controller"]["pods"] and
                         [p for p in control_stats()["controller"]["pods"] if p["sandbox"] == "stuck-sb"], [])

    def test_warm_adoption_refill_and_cascade(self):
        api("POST", EXT + "/sandboxclaims", claim("cascade-claim"), expect=201)
        o = wait_claim("cascade-claim")
        sb = o["status"]["sandbox"]["name"]
        s = api("GET", SBX + "/sandboxes/" + sb)[1]
        self.assertEqual(s["metadata"]["ownerReferences"][0]["uid"], o["metadata"]["uid"])
        self.assertEqual(s["metadata"]["labels"]["agents.x-k8s.io/launch-type"], "warm")
        self.assertNotIn("agents.x-k8s.io/warm-pool-sandbox", s["metadata"]["labels"])
        deadline = time.time() + 20
        while time.time() < deadline:
            p = api("GET", EXT + "/sandboxwarmpools/sandboxd-pool")[1]
            if p.get("status", {}).get("readyReplicas") == 2:
                break
            time.sleep(0.1)
        self.assertEqual(p["status"]["readyReplicas"], 2)
        api("DELETE", EXT + "/sandboxclaims/cascade-claim", expect=200)
        self.assertEqual(api("GET", SBX + "/sandboxes/" + sb)[0], 404)
        self.assertEqual(rest(sb, "GET", "/v1/health")[0], 502)

    def test_claim_shutdown_time(self):
        c = claim("short-claim", lifecycle={"shutdownTime": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3)), "shutdownPolicy": "Retain"})
        api("POST", EXT + "/sandboxclaims", c, expect=201)
        deadline = time.time() + 10
        sb = None
        while sb is None and time.time() < deadline:
            sb = next((b["sandbox"] for b in control_stats()["controller"]["binds"]
                       if b["claim"] == "short-claim"), None)
            time.sleep(0.05)
        self.assertIsNotNone(sb, "the claim was never bound")
        o = wait_claim("short-claim", timeout=15, want="False")
        while ready(o)["reason"] != "ClaimExpired" and time.time() < deadline + 5:
            o = wait_claim("short-claim", timeout=15, want="False")
        self.assertEqual(ready(o)["reason"], "ClaimExpired")
        self.assertEqual(o["status"].get("sandbox"), {})
        self.assertEqual(api("GET", SBX + "/sandboxes/" + sb)[0], 404)
        api("DELETE", EXT + "/sandboxclaims/short-claim", expect=200)

    def test_sandbox_direct_suspend_and_shutdown(self):
        # A Sandbox made directly (no claim): routable by name, suspended
        # and resumed, then deleted at its shutdownTime (policy Delete).
        sb = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
              "metadata": {"name": "direct-sb"},
              "spec": {"podTemplate": {"spec": {"containers": [{"name": "sandboxd"}]}},
                       "shutdownPolicy": "Delete"}}
        api("POST", SBX + "/sandboxes", sb, expect=201)

        def wait_sb(pred, timeout=15):
            deadline = time.time() + timeout
            while time.time() < deadline:
                code, o = api("GET", SBX + "/sandboxes/direct-sb")
                if pred(code, o):
                    return code, o
                time.sleep(0.05)
            raise AssertionError("sandbox: %s %s" % (code, o))
        wait_sb(lambda c, o: c == 200 and ready(o).get("status") == "True")
        self.assertEqual(rest("direct-sb", "PUT", "/v1/files/f", b"1")[0], 204)
        api("PATCH", SBX + "/sandboxes/direct-sb", {"spec": {"operatingMode": "Suspended"}},
            ctype="application/merge-patch+json", expect=200)
        _, o = wait_sb(lambda c, o: ready(o).get("reason") == "SandboxSuspended")
        self.assertNotIn("podIPs", o["status"])
        self.assertEqual(rest("direct-sb", "GET", "/v1/health")[0], 502)
        api("PATCH", SBX + "/sandboxes/direct-sb", {"spec": {"operatingMode": "Running"}},
            ctype="application/merge-patch+json", expect=200)
        wait_sb(lambda c, o: ready(o).get("status") == "True")
        self.assertEqual(rest("direct-sb", "GET", "/v1/health")[0], 200)
        self.assertEqual(rest("direct-sb", "GET", "/v1/files/f")[0], 404)  # a new pod
        api("PATCH", SBX + "/sandboxes/direct-sb", {"spec": {"shutdownTime": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))}},
            ctype="application/merge-patch+json", expect=200)
        wait_sb(lambda c, o: c == 404)
        self.assertEqual(rest("direct-sb", "GET", "/v1/health")[0], 502)

    def test_missing_pool(self):
        api("POST", EXT + "/sandboxclaims", claim("nopool", warmPoolRef={"name": "nope"}), expect=201)
        o = wait_claim("nopool", want="False")
        self.assertEqual(ready(o)["reason"], "WarmPoolNotFound")
        api("DELETE", EXT + "/sandboxclaims/nopool", expect=200)


def watch(path, until, timeout=10):
    """Events of a watch until until(event) is true; raises when the stream
    ends first (a dropped watch)."""
    u = urllib.parse.urlsplit(INFO["api"])
    s = socket.create_connection((u.hostname, u.port), timeout=timeout)
    s = INFO["ctx"].wrap_socket(s, server_hostname=u.hostname)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
               % (path, INFO["token"])).encode())
    f = s.makefile("rb")
    status = f.readline()
    assert b" 200 " in status, status
    while f.readline() not in (b"\r\n", b""):
        pass
    evs = []
    try:
        while True:
            size = f.readline()
            if not size:
                raise ConnectionError("watch ended")
            n = int(size.strip(), 16)
            if n == 0:
                raise ConnectionError("watch closed")
            data = f.read(n)
            f.readline()
            for line in data.splitlines():
                ev = json.loads(line)
                evs.append(ev)
                if until(ev):
                    return evs
    finally:
        s.close()


import urllib.parse  # noqa: E402

if __name__ == "__main__":
    unittest.main(verbosity=2)
