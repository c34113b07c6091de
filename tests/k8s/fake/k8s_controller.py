"""k8s_controller.py - the fake agent-sandbox controller: a "pod" (one
fake_sandboxd.py process with its own workspace directory) per Sandbox,
Sandbox Ready conditions, SandboxWarmPools kept at spec.replicas, claims
bound to a pooled Sandbox (adoption) or to a new one made from the pool's
template (cold start), shutdownTime and shutdownPolicy of Sandboxes and
claims. Modelled on controllers/sandbox_controller.go and
extensions/controllers/sandbox{claim,warmpool}_controller.go (v0.5.6)."""
import copy
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import k8s_store as ks
from k8s_store import ApiError

HERE = os.path.dirname(os.path.abspath(__file__))
WARM_POOL_LABEL = "agents.x-k8s.io/warm-pool-sandbox"
CLAIM_UID_LABEL = "agents.x-k8s.io/claim-uid"
LAUNCH_TYPE_LABEL = "agents.x-k8s.io/launch-type"
TEMPLATE_REF_HASH_LABEL = "agents.x-k8s.io/sandbox-template-ref-hash"
TEMPLATE_HASH_LABEL = "agents.x-k8s.io/sandbox-template-hash"
NAME_HASH_LABEL = "agents.x-k8s.io/sandbox-name-hash"
POD_NAME_ANNOTATION = "agents.x-k8s.io/pod-name"


def name_hash(name):
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def set_condition(obj, typ, status, reason, message, gen=None):
    st = obj.setdefault("status", {})
    conds = st.setdefault("conditions", [])
    c = next((c for c in conds if c.get("type") == typ), None)
    new = {"type": typ, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": ks.now_iso()}
    if gen is not None:
        new["observedGeneration"] = gen
    if c is None:
        conds.append(new)
        return
    if c.get("status") == status:
        new["lastTransitionTime"] = c.get("lastTransitionTime", new["lastTransitionTime"])
    c.clear()
    c.update(new)


def ready_condition(obj):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c
    return None


def owner_ref(obj, controller=True):
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


def owned_by(obj, owner_uid):
    return any(r.get("uid") == owner_uid for r in obj["metadata"].get("ownerReferences") or [])


class Pod:
    """The sandboxd of one Sandbox."""
    def __init__(self, key, root, env, healthy, ready_delay):
        self.key = key          # (namespace, sandbox name, sandbox uid)
        self.root = root
        self.ready = False
        self.ports = None
        self.proc = None
        self.stopped = False
        self.started_at = time.time()
        self.ready_at = None
        self.env = env
        self.healthy = healthy
        self.ready_delay = ready_delay

    def start(self, on_ready):
        threading.Thread(target=self._run, args=(on_ready,), daemon=True).start()

    def _run(self, on_ready):
        ws = os.path.join(self.root, "workspace")
        os.makedirs(ws, exist_ok=True)
        pf = os.path.join(self.root, "ports.json")
        env = dict(os.environ)
        env.update(self.env)
        env.update(SANDBOX_ROOT_DIR=ws)
        if not self.healthy:
            env["FAKE_SANDBOXD_UNHEALTHY"] = "1"
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        self.proc = subprocess.Popen(
            [py, os.path.join(HERE, "fake_sandboxd.py"), "--root-dir", ws, "--port-file", pf,
             "--parent-pid", str(os.getpid())],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.root, "sandboxd.log"), "ab"), start_new_session=True)
        deadline = time.time() + 30
        while not self.stopped and time.time() < deadline and self.proc.poll() is None:
            if os.path.exists(pf):
                with open(pf) as f:
                    self.ports = json.load(f)
                break
            time.sleep(0.02)
        if self.ports and self.ready_delay:
            time.sleep(self.ready_delay)
        # The readiness probe: GET /v1/health, as the template's probe.
        while not self.stopped and self.ports and self.proc.poll() is None:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/v1/health" % self.ports["rest"],
                                            timeout=2) as r:
                    if r.status == 200:
                        self.ready = True
                        self.ready_at = time.time()
                        on_ready()
                        return
            except OSError:
                pass
            time.sleep(0.2)

    def stop(self):
        self.stopped = True
        self.ready = False
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        shutil.rmtree(self.root, ignore_errors=True)


class Controller:
    def __init__(self, store, faults, state_dir, ready_delay=0.0):
        self.store = store
        self.faults = faults
        self.dir = os.path.join(state_dir, "pods")
        os.makedirs(self.dir, exist_ok=True)
        self.pods = {}          # sandbox uid -> Pod
        self.pods_lock = threading.Lock()
        self.kick = threading.Event()
        self.ready_delay = ready_delay
        self.binds = []         # claim bind records for /_fake/stats
        self.never_ready_uids = set()
        self.claim_env = {}
        self.pod_seq = 0
        self.created = {}       # claim uid -> when the API server stored it
        self.stopping = False
        store.hooks.append(self._on_event)

    # -- events ---------------------------------------------------------------
    def _on_event(self, typ, plural, obj):
        if typ == "ADDED" and plural == "sandboxclaims":
            # the claim's creation, precisely (creationTimestamp has seconds)
            self.created[obj["metadata"]["uid"]] = time.time()
        if typ == "DELETED" and plural == "sandboxes":
            uid = obj["metadata"]["uid"]
            with self.pods_lock:
                pod = self.pods.pop(uid, None)
            if pod:
                threading.Thread(target=pod.stop, daemon=True).start()
        self.kick.set()

    def start(self):
        threading.Thread(target=self._loop, daemon=True).start()

    def shutdown(self):
        self.stopping = True
        with self.pods_lock:
            pods = list(self.pods.values())
            self.pods = {}
        for p in pods:
            p.stop()

    def pod_for(self, uid):
        with self.pods_lock:
            return self.pods.get(uid)

    def stats(self):
        with self.pods_lock:
            pods = [{"namespace": p.key[0], "sandbox": p.key[1], "uid": p.key[2], "ready": p.ready,
                     "ports": p.ports, "root": os.path.join(p.root, "workspace"),
                     "start_to_ready_ms": int((p.ready_at - p.started_at) * 1000) if p.ready_at else None}
                    for p in self.pods.values()]
        return {"pods": pods, "binds": list(self.binds[-1000:])}

    def _loop(self):
        while not self.stopping:
            self.kick.wait(0.25)
            self.kick.clear()
            try:
                self.reconcile()
            except Exception as e:  # noqa: BLE001  (a fake: log and go on)
                sys.stderr.write("fake controller: %r\n" % (e,))

    def reconcile(self):
        st = self.store
        with st.lock:
            for plural, fn in (("sandboxclaims", self._claim), ("sandboxwarmpools", self._pool),
                               ("sandboxes", self._sandbox)):
                objs, _ = st.list(plural)
                for o in objs:
                    try:
                        fn(o)
                    except ApiError as e:
                        if e.code not in (404, 409):
                            raise

    # -- Sandbox ------------------------------------------------------------
    def _sandbox(self, sb):
        md, spec = sb["metadata"], sb.get("spec") or {}
        ns, name, uid = md["namespace"], md["name"], md["uid"]
        if md.get("deletionTimestamp"):
            return
        t = ks.parse_iso(spec.get("shutdownTime") or "")
        if t is not None and time.time() >= t:
            self._stop_pod(uid)
            if spec.get("shutdownPolicy") == "Delete":
                self.store.delete("sandboxes", ns, name)
                return

            def expired(o):
                set_condition(o, "Ready", "False", "SandboxExpired", "Sandbox has expired",
                              o["metadata"].get("generation"))
                o["status"].pop("podIPs", None)
            self.store.mutate("sandboxes", ns, name, expired, "status")
            return
        if spec.get("operatingMode") == "Suspended":
            self._stop_pod(uid)

            def suspended(o):
                set_condition(o, "Ready", "False", "SandboxSuspended", "Sandbox is suspended",
                              o["metadata"].get("generation"))
                set_condition(o, "Suspended", "True", "PodTerminated", "Pod has been terminated")
                o["status"].pop("podIPs", None)
            self.store.mutate("sandboxes", ns, name, suspended, "status")
            return
        pod = self.pod_for(uid)
        if pod is None:
            env = {"SANDBOX_NAME": name, "SANDBOX_NAMESPACE": ns}
            for e in self.claim_env.pop(uid, []):
                if isinstance(e, dict) and e.get("name"):
                    env[e["name"]] = str(e.get("value", ""))
            healthy = uid not in self.never_ready_uids and not self.faults.take(
                ("never_ready",), "create", "sandboxes", name, exact=True)
            # A directory per pod, not per Sandbox: a stopped pod's cleanup
            # must not remove the workspace of the one that replaces it.
            self.pod_seq += 1
            pod = Pod((ns, name, uid), os.path.join(self.dir, "%s-%s-%s-%d" % (
                ns, name, uid[:8], self.pod_seq)),
                      env, healthy, self.ready_delay)
            with self.pods_lock:
                self.pods[uid] = pod
            pod.start(self.kick.set)

        def status(o):
            s = o.setdefault("status", {})
            gen = o["metadata"].get("generation")
            if pod.ready:
                set_condition(o, "Ready", "True", "DependenciesReady", "Pod is Ready; Service Exists", gen)
                s["podIPs"] = ["127.0.0.1"]
            else:
                set_condition(o, "Ready", "False", "DependenciesNotReady",
                              "Pod exists with phase: Pending", gen)
                s.pop("podIPs", None)
            if (o.get("status") or {}).get("conditions"):
                for c in o["status"]["conditions"]:
                    if c["type"] == "Suspended":
                        c.update(status="False", reason="NotSuspended", message="Sandbox is running")
            s["selector"] = "%s=%s" % (NAME_HASH_LABEL, name_hash(name))
            s["service"] = name
            s["serviceFQDN"] = "%s.%s.svc.cluster.local" % (name, ns)
            s["nodeName"] = "fake-node"
        self.store.mutate("sandboxes", ns, name, status, "status")

    def _stop_pod(self, uid):
        with self.pods_lock:
            pod = self.pods.pop(uid, None)
        if pod:
            threading.Thread(target=pod.stop, daemon=True).start()

    # -- SandboxWarmPool ----------------------------------------------------
    def _pool_members(self, pool):
        h = name_hash(pool["metadata"]["name"])
        sbs, _ = self.store.list("sandboxes", pool["metadata"]["namespace"],
                                 "%s=%s" % (WARM_POOL_LABEL, h))
        return [s for s in sbs if owned_by(s, pool["metadata"]["uid"])
                and not s["metadata"].get("deletionTimestamp")]

    def _sandbox_from_template(self, tmpl, name=None, generate=None, labels=None, owner=None):
        pt = copy.deepcopy((tmpl.get("spec") or {}).get("podTemplate") or {})
        md = {"labels": dict(labels or {}), "annotations": {
            "agents.x-k8s.io/sandbox-template-ref": tmpl["metadata"]["name"]}}
        if name:
            md["name"] = name
        else:
            md["generateName"] = generate
        if owner:
            md["ownerReferences"] = [owner_ref(owner)]
        pmd = pt.setdefault("metadata", {})
        pmd.setdefault("labels", {}).update(labels or {})
        return {"apiVersion": "%s/%s" % (ks.SANDBOX_GROUP, ks.STORAGE), "kind": "Sandbox",
                "metadata": md, "spec": {"podTemplate": pt}}

    def _pool(self, pool):
        md, spec = pool["metadata"], pool.get("spec") or {}
        ns, name = md["namespace"], md["name"]
        if md.get("deletionTimestamp"):
            return
        members = self._pool_members(pool)
        want = int(spec.get("replicas", 1) or 0)
        tname = (spec.get("sandboxTemplateRef") or {}).get("name")
        try:
            tmpl = self.store.get("sandboxtemplates", ns, tname) if tname else None
        except ApiError:
            tmpl = None
        if tmpl is not None and len(members) < want:
            h = name_hash(name)
            for _ in range(want - len(members)):
                labels = {WARM_POOL_LABEL: h, TEMPLATE_REF_HASH_LABEL: name_hash(tname),
                          TEMPLATE_HASH_LABEL: name_hash(json.dumps(tmpl.get("spec"), sort_keys=True))}
                self.store.create("sandboxes", ns, self._sandbox_from_template(
                    tmpl, generate=name + "-", labels=labels, owner=pool))
            members = self._pool_members(pool)
        elif len(members) > want:
            # Scale down: the not-ready ones first, then the newest.
            def order(s):
                r = ready_condition(s)
                return (r is not None and r.get("status") == "True", s["metadata"]["creationTimestamp"])
            for s in sorted(members, key=order)[:len(members) - want]:
                self.store.delete("sandboxes", ns, s["metadata"]["name"])
            members = self._pool_members(pool)
        ready = sum(1 for s in members if (ready_condition(s) or {}).get("status") == "True")

        def status(o):
            o["status"] = {"replicas": len(members), "readyReplicas": ready,
                           "selector": "%s=%s" % (WARM_POOL_LABEL, name_hash(name)),
                           "observedGeneration": o["metadata"].get("generation", 1)}
        self.store.mutate("sandboxwarmpools", ns, name, status, "status")

    # -- SandboxClaim -------------------------------------------------------
    def _claim(self, claim):
        md, spec = claim["metadata"], claim.get("spec") or {}
        ns, name, uid = md["namespace"], md["name"], md["uid"]
        gen = md.get("generation")
        if md.get("deletionTimestamp"):
            return
        lc = spec.get("lifecycle") or {}
        status = claim.get("status") or {}
        bound = (status.get("sandbox") or {}).get("name")
        t = ks.parse_iso(lc.get("shutdownTime") or "")
        if t is not None and time.time() >= t:
            policy = lc.get("shutdownPolicy") or "Retain"
            if policy in ("Delete", "DeleteForeground"):
                self.store.delete("sandboxclaims", ns, name)
                return
            if bound:
                try:
                    sb = self.store.get("sandboxes", ns, bound)
                    if owned_by(sb, uid):
                        self.store.delete("sandboxes", ns, bound)
                except ApiError:
                    pass

            def expired(o):
                set_condition(o, "Ready", "False", "ClaimExpired",
                              "Claim expired. Sandbox cleanup initiated.", gen)
                o["status"]["sandbox"] = {}
            self.store.mutate("sandboxclaims", ns, name, expired, "status")
            return
        sb = None
        if bound:
            try:
                sb = self.store.get("sandboxes", ns, bound)
            except ApiError:
                sb = None
            if sb is not None and not owned_by(sb, uid):
                sb = None
        else:
            sb = self._bind(claim)
            if sb is None:
                return

        def forward(o):
            s = o.setdefault("status", {})
            if sb is None:
                set_condition(o, "Ready", "False", "SandboxMissing", "Sandbox does not exist", gen)
                return
            r = ready_condition(sb)
            if r is None:
                set_condition(o, "Ready", "False", "SandboxNotReady", "Sandbox is not ready", gen)
            elif r.get("reason") == "SandboxExpired":
                set_condition(o, "Ready", "False", "SandboxExpired",
                              "Underlying Sandbox resource has expired independently of the Claim.", gen)
            else:
                set_condition(o, "Ready", r["status"], r["reason"], r["message"], gen)
                if r["status"] == "True":
                    for b in self.binds:
                        if b["uid"] == uid and b.get("ready_ms") is None:
                            b["ready_ms"] = int((time.time() - b["t0"]) * 1000)
            s["sandbox"] = {"name": sb["metadata"]["name"]}
            if (sb.get("status") or {}).get("podIPs"):
                s["sandbox"]["podIPs"] = sb["status"]["podIPs"]
        self.store.mutate("sandboxclaims", ns, name, forward, "status")

    def _claim_fail(self, claim, reason, message):
        def f(o):
            set_condition(o, "Ready", "False", reason, message, o["metadata"].get("generation"))
        self.store.mutate("sandboxclaims", claim["metadata"]["namespace"],
                          claim["metadata"]["name"], f, "status")

    def _bind(self, claim):
        md, spec = claim["metadata"], claim.get("spec") or {}
        ns, name, uid = md["namespace"], md["name"], md["uid"]
        pname = (spec.get("warmPoolRef") or {}).get("name")
        try:
            pool = self.store.get("sandboxwarmpools", ns, pname)
        except ApiError:
            self._claim_fail(claim, "WarmPoolNotFound", 'SandboxWarmPool "%s" not found' % pname)
            return None
        tname = ((pool.get("spec") or {}).get("sandboxTemplateRef") or {}).get("name")
        try:
            tmpl = self.store.get("sandboxtemplates", ns, tname)
        except ApiError:
            self._claim_fail(claim, "TemplateNotFound", 'SandboxTemplate "%s" not found' % tname)
            return None
        t0 = self.created.pop(uid, None) or time.time()
        rec = {"namespace": ns, "claim": name, "uid": uid, "t0": t0, "ready_ms": None}
        stuck = self.faults.take(("never_ready",), "create", "sandboxclaims", name)
        members = [] if stuck else self._pool_members(pool)
        members.sort(key=lambda s: ((ready_condition(s) or {}).get("status") != "True",
                                    s["metadata"]["creationTimestamp"]))
        claim_labels = {CLAIM_UID_LABEL: uid}
        created_by = (md.get("labels") or {}).get("agents.x-k8s.io/created-by")
        if created_by:
            claim_labels["agents.x-k8s.io/created-by"] = created_by
        if members:
            sb = members[0]

            def adopt(o):
                lab = o["metadata"].setdefault("labels", {})
                for k in (WARM_POOL_LABEL, TEMPLATE_HASH_LABEL,
                          "agents.x-k8s.io/sandbox-pod-template-hash"):
                    lab.pop(k, None)
                lab[LAUNCH_TYPE_LABEL] = "warm"
                lab.update(claim_labels)
                o["metadata"]["ownerReferences"] = [owner_ref(claim)]
                o["metadata"].setdefault("annotations", {})[POD_NAME_ANNOTATION] = o["metadata"]["name"]
                pmd = o["spec"].setdefault("podTemplate", {}).setdefault("metadata", {})
                pl = pmd.setdefault("labels", {})
                pl.pop(WARM_POOL_LABEL, None)
                pl.update(claim_labels)
            sb = self.store.mutate("sandboxes", ns, sb["metadata"]["name"], adopt)
            rec.update(launch="warm", sandbox=sb["metadata"]["name"])
        else:
            labels = dict(claim_labels)
            labels.update({LAUNCH_TYPE_LABEL: "cold", TEMPLATE_REF_HASH_LABEL: name_hash(tname)})
            obj = self._sandbox_from_template(tmpl, name=name, labels=labels, owner=claim)
            try:
                sb = self.store.create("sandboxes", ns, obj)
            except ApiError as e:
                if e.code != 409:
                    raise
                sb = self.store.get("sandboxes", ns, name)
                if not owned_by(sb, uid):
                    self._claim_fail(claim, "ReconcilerError",
                                     'Error seen: sandbox "%s" exists and is not owned by the claim' % name)
                    return None
            if stuck:
                self.never_ready_uids.add(sb["metadata"]["uid"])
            # The claim's env reaches a cold-started pod's environment.
            self.claim_env[sb["metadata"]["uid"]] = list(spec.get("env") or [])
            rec.update(launch="cold", sandbox=sb["metadata"]["name"])
        rec["bind_ms"] = int((time.time() - t0) * 1000)
        self.binds.append(rec)
        return sb
