#!/usr/bin/env python3
"""fake_k8s.py - a fake Kubernetes cluster running agent-sandbox, for the
tests: a stateful API server for the four CRDs, the agent-sandbox
controller, the sandbox-router and one fake sandboxd per Sandbox, all on
loopback. See README.md beside this file for what it implements, what it
does not, and the fault knobs.

Start:  fake_k8s.py --dir D [--port-file F] [--token T] [--plain-http] [--seed]
        [--api-port 0] [--router-port 0] [--ready-delay-ms 0]
        [--router-require-token] [--router-retry-ms 50] [--history 2000]
        [--field-validation Ignore|Warn|Strict]
Prints (and writes to F) one JSON line:
  {"api": "http://127.0.0.1:P", "router": "http://127.0.0.1:Q",
   "token": T, "kubeconfig": "D/kubeconfig", "namespace": "default",
   "ca": "D/tls.crt" (not with --plain-http), "pid": N,
   "serviceaccount": "D/serviceaccount" (token, ca.crt, namespace),
   "host": "127.0.0.1", "port": P (KUBERNETES_SERVICE_HOST/PORT)}
FAKE_K8S_FAULTS may hold a JSON list of fault rules armed at start.
"""
import os
import sys

try:
    import grpc  # noqa: F401
except ImportError:
    # Debian's python3-grpcio is installed for /usr/bin/python3.
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
            and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.stderr.write("fake_k8s: python3-grpcio is not installed\n")
    sys.exit(3)

import argparse
import json
import secrets
import signal
import subprocess
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_api  # noqa: E402
import k8s_controller  # noqa: E402
import k8s_router  # noqa: E402
import k8s_store  # noqa: E402

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {server}
{ca}contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: default
current-context: fake
users:
- name: fake
  user:
    token: {token}
"""

TEMPLATE = {
    "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
    "metadata": {"name": "sandboxd-template"},
    "spec": {"podTemplate": {"spec": {"containers": [{
        "name": "sandboxd", "image": "fake/sandboxd:latest",
        "ports": [{"containerPort": 8080}, {"containerPort": 9090}],
        "readinessProbe": {"httpGet": {"path": "/v1/health", "port": 8080}}}]}}},
}
POOL = {
    "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
    "metadata": {"name": "sandboxd-pool"},
    "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "sandboxd-template"}},
}


def make_cert(d):
    crt, key = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
    # P-256: its key is made in a millisecond, an RSA one in 150 ms of CPU
    # (the fake starts once per test case)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=fake-k8s", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", key, "-out", crt], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return crt, key


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="state: kubeconfig, pods' workspaces")
    ap.add_argument("--port-file")
    ap.add_argument("--token", default=None)
    ap.add_argument("--token-ttl", type=float, default=0, help="seconds; 0 = no expiry")
    ap.add_argument("--plain-http", action="store_true",
                    help="serve the API over plain HTTP (kubectl then sends no bearer token)")
    ap.add_argument("--seed", action="store_true",
                    help="create SandboxTemplate sandboxd-template and SandboxWarmPool "
                         "sandboxd-pool (2 replicas) in namespace default")
    ap.add_argument("--api-port", type=int, default=0)
    ap.add_argument("--router-port", type=int, default=0)
    ap.add_argument("--ready-delay-ms", type=int, default=0)
    ap.add_argument("--router-require-token", action="store_true")
    ap.add_argument("--router-retry-ms", type=int, default=50)
    ap.add_argument("--history", type=int, default=2000)
    ap.add_argument("--field-validation", choices=("Ignore", "Warn", "Strict"), default="Warn",
                    help="for requests that name no fieldValidation (Strict: an unknown "
                         "field is a 400, to catch a client's typos)")
    ap.add_argument("--no-crd", action="append", default=[], choices=sorted(k8s_api.RESOURCES),
                    help="serve this resource as if its CRD were not installed: absent from "
                         "discovery, its paths 404 (repeatable; a group with none left is "
                         "not served at all)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    import time
    token = a.token or secrets.token_hex(16)
    tokens = {token: (time.time() + a.token_ttl) if a.token_ttl else None}
    store = k8s_store.Store(a.history)
    faults = k8s_api.Faults()
    if os.environ.get("FAKE_K8S_FAULTS"):
        faults.add(json.loads(os.environ["FAKE_K8S_FAULTS"]))
    ctl = k8s_controller.Controller(store, faults, a.dir, a.ready_delay_ms / 1000.0)
    api = k8s_api.Api(store, tokens, faults)
    api.controller = ctl
    api.field_validation = a.field_validation
    api.absent = set(a.no_crd)
    tls = None if a.plain_http else make_cert(a.dir)
    srv = k8s_api.serve(api, port=a.api_port, tls=tls)
    router = k8s_router.Router(store, ctl, faults, tokens, a.router_require_token,
                               retry_ms=a.router_retry_ms)
    rport, gsrv = k8s_router.serve(router, port=a.router_port)
    ctl.start()
    if a.seed:
        store.create("sandboxtemplates", "default", json.loads(json.dumps(TEMPLATE)))
        store.create("sandboxwarmpools", "default", json.loads(json.dumps(POOL)))
    scheme = "https" if tls else "http"
    server = "%s://127.0.0.1:%d" % (scheme, srv.server_address[1])
    kc = os.path.join(a.dir, "kubeconfig")
    ca = ""
    if tls:
        ca = "    certificate-authority: %s\n" % tls[0]
    with open(kc, "w") as f:
        f.write(KUBECONFIG.format(server=server, ca=ca, token=token))
    os.chmod(kc, 0o600)
    info = {"api": server, "router": "http://127.0.0.1:%d" % rport, "token": token,
            "kubeconfig": kc, "namespace": "default", "pid": os.getpid()}
    if tls:
        info["ca"] = tls[0]
    # In-cluster credentials, as a pod's service account sees them.
    sa = os.path.join(a.dir, "serviceaccount")
    os.makedirs(sa, exist_ok=True)
    for fname, text in (("token", token), ("namespace", "default")):
        with open(os.path.join(sa, fname), "w") as f:
            f.write(text)
    if tls:
        import shutil
        shutil.copyfile(tls[0], os.path.join(sa, "ca.crt"))
    api.token_file = os.path.join(sa, "token")
    info["serviceaccount"] = sa
    info["host"], info["port"] = "127.0.0.1", srv.server_address[1]
    line = json.dumps(info)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(line + "\n")
        os.rename(a.port_file + ".tmp", a.port_file)
    print(line, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    ctl.shutdown()
    gsrv.stop(0)
    srv.shutdown()


if __name__ == "__main__":
    main()
