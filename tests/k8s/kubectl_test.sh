#!/usr/bin/env bash
# kubectl_test.sh SRC_DIR - the fake Kubernetes API server (tests/k8s/fake)
# driven by the official kubectl: discovery, apply (create, unchanged,
# configured), get with Tables, a label selector and jsonpath, get -w seeing
# a claim go Ready, wait --for=condition=Ready, patch --type=merge, a stale
# replace refused with 409, delete cascading to the bound Sandbox, and a
# wrong token refused.
# Exit 77 (skipped) when kubectl, openssl or python3-grpcio is missing.
set -euo pipefail
src=$1
here="$src/tests/k8s"
command -v kubectl >/dev/null || { echo "skipped: kubectl is not installed"; exit 77; }
command -v openssl >/dev/null || { echo "skipped: openssl is not installed"; exit 77; }
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" -c 'import grpc' 2>/dev/null || { echo "skipped: python3-grpcio is not installed"; exit 77; }

dir=$(mktemp -d /tmp/sbx-k8s-kubectl.XXXXXX)
"$py" "$here/fake/fake_k8s.py" --dir "$dir" --port-file "$dir/info" >/dev/null &
fake=$!
cleanup() { kill "$fake" 2>/dev/null; wait "$fake" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 200); do [ -s "$dir/info" ] && break; sleep 0.05; done
export KUBECONFIG="$dir/kubeconfig"
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

kubectl version --client 2>/dev/null | head -1 || true

step "discovery"
kubectl api-resources --api-group=extensions.agents.x-k8s.io -o name | sort | tee "$dir/res"
grep -qx sandboxclaims.extensions.agents.x-k8s.io "$dir/res" || fail "no sandboxclaims in discovery"
grep -qx sandboxwarmpools.extensions.agents.x-k8s.io "$dir/res" || fail "no sandboxwarmpools"
kubectl api-resources --api-group=agents.x-k8s.io -o name | grep -qx sandboxes.agents.x-k8s.io ||
  fail "no sandboxes in discovery"

step "apply the template and the warm pool"
kubectl apply -f "$here/manifests/template.yaml" | grep -q created || fail "template not created"
kubectl apply -f "$here/manifests/warmpool.yaml" | grep -q created || fail "pool not created"
kubectl apply -f "$here/manifests/warmpool.yaml" | grep -q unchanged || fail "re-apply not unchanged"
for _ in $(seq 200); do
  [ "$(kubectl get swp kubectl-pool -o jsonpath='{.status.readyReplicas}')" = 1 ] && break
  sleep 0.1
done
kubectl get sandboxwarmpools | tee "$dir/swp"
grep -Eq '^kubectl-pool +1 +1 ' "$dir/swp" || fail "pool not 1/1 Ready in the table"

step "get -w sees the claim go Ready"
kubectl get sandboxclaims -w --output-watch-events >"$dir/watch" 2>&1 &
watcher=$!
sleep 1
kubectl apply -f "$here/manifests/claim.yaml" | grep -q created || fail "claim not created"
kubectl wait --for=condition=Ready sandboxclaim/kubectl-claim --timeout=30s
for _ in $(seq 50); do grep -q 'MODIFIED.*kubectl-claim.*True' "$dir/watch" && break; sleep 0.1; done
kill "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
cat "$dir/watch"
grep -q 'ADDED.*kubectl-claim' "$dir/watch" || fail "the watch missed ADDED"
grep -q 'MODIFIED.*kubectl-claim.*True.*DependenciesReady' "$dir/watch" ||
  fail "the watch did not see the claim go Ready"

step "get with a label selector and jsonpath"
sb=$(kubectl get sandboxclaim kubectl-claim -o jsonpath='{.status.sandbox.name}')
[ -n "$sb" ] || fail "claim has no sandbox"
kubectl get sandboxes -l agents.x-k8s.io/launch-type=warm -o name | grep -qx "sandbox.agents.x-k8s.io/$sb" ||
  fail "the adopted sandbox is not selected by its launch-type label"
[ "$(kubectl get sandboxclaims -l sbx.test/owner=nobody -o name)" = "" ] || fail "selector matched"
kubectl get sandboxclaims -l sbx.test/owner=kubectl -o name | grep -qx sandboxclaim.extensions.agents.x-k8s.io/kubectl-claim ||
  fail "selector missed the claim"
kubectl get sandbox "$sb" -o wide

step "patch --type=merge, and a stale replace is a conflict"
kubectl get sandboxclaim kubectl-claim -o json >"$dir/stale.json"
kubectl patch sandboxclaim kubectl-claim --type=merge -p '{"metadata":{"labels":{"patched":"yes"}}}'
[ "$(kubectl get sandboxclaim kubectl-claim -o jsonpath='{.metadata.labels.patched}')" = yes ] ||
  fail "merge patch not applied"
if kubectl replace -f "$dir/stale.json" 2>"$dir/replace.err"; then fail "stale replace accepted"; fi
cat "$dir/replace.err"
grep -q "the object has been modified" "$dir/replace.err" || fail "no conflict message"

step "an unknown field is named (refused by kubectl's strict validation, a warning before 1.25)"
sed 's/    name: kubectl-pool/    name: kubectl-pool\n  bogusField: 1/' "$here/manifests/claim.yaml" |
  sed 's/kubectl-claim/kubectl-typo/' >"$dir/typo.yaml"
kubectl apply -f "$dir/typo.yaml" >"$dir/typo.out" 2>&1 || true
cat "$dir/typo.out"
grep -q 'unknown field "spec.bogusField"' "$dir/typo.out" || fail "the unknown field went unnoticed"
kubectl delete --ignore-not-found -f "$dir/typo.yaml"

step "apply a change is configured"
sed 's/owner: kubectl/owner: kubectl\n    changed: "yes"/' "$here/manifests/claim.yaml" >"$dir/claim2.yaml"
kubectl apply -f "$dir/claim2.yaml" | grep -q configured || fail "changed apply not configured"

step "delete cascades to the sandbox"
kubectl delete -f "$here/manifests/claim.yaml"
if kubectl get sandbox "$sb" 2>"$dir/get.err"; then fail "sandbox $sb outlived its claim"; fi
grep -q NotFound "$dir/get.err" || fail "no NotFound: $(cat "$dir/get.err")"
kubectl delete sandboxwarmpool kubectl-pool
for _ in $(seq 50); do
  [ -z "$(kubectl get sandboxes -o name)" ] && break
  sleep 0.1
done
[ -z "$(kubectl get sandboxes -o name)" ] || fail "pool sandboxes outlived the pool"

step "a wrong token is refused"
sed -i 's/token: .*/token: wrong-token/' "$KUBECONFIG"
if kubectl get sandboxclaims 2>"$dir/auth.err"; then fail "wrong token accepted"; fi
grep -Eqi "unauthorized|provide credentials" "$dir/auth.err" || fail "no 401: $(cat "$dir/auth.err")"
echo "kubectl: all steps passed"
