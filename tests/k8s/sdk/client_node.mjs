// client_node.mjs - the official Kubernetes JavaScript client
// (@kubernetes/client-node, pinned in package-lock.json) against the fake
// API server of tests/k8s/fake: create, get, list with a label selector, a
// watch seeing the claim go Ready (from the list's resourceVersion), a merge
// patch, a 409 on a stale replace and on a second create, delete, a watch
// from a compacted resourceVersion answered 410, and a wrong token refused.
// Env: KUBECONFIG (the fake's), FAKE_K8S_API (its address, for /_fake).
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';

const group = 'extensions.agents.x-k8s.io';
const version = 'v1beta1';
const namespace = 'default';
const kc = new k8s.KubeConfig();
kc.loadFromFile(process.env.KUBECONFIG);
const co = kc.makeApiClient(k8s.CustomObjectsApi);
const ca = fs.readFileSync(kc.getCurrentCluster().caFile);

function control(path, body) {
  return new Promise((resolve, reject) => {
    const req = https.request(`${process.env.FAKE_K8S_API}/_fake/${path}`,
      { method: 'POST', ca }, (res) => {
        let data = '';
        res.on('data', (c) => { data += c; });
        res.on('end', () => resolve(JSON.parse(data || 'null')));
      });
    req.on('error', reject);
    req.end(JSON.stringify(body ?? {}));
  });
}

async function expectCode(p, code, what) {
  try {
    await p;
  } catch (e) {
    assert.equal(e.code, code, `${what}: ${e}`);
    return e;
  }
  assert.fail(`${what}: no error`);
}

function step(s) { console.log(`== ${s}`); }

const ready = (o) => (o?.status?.conditions ?? []).find((c) => c.type === 'Ready');
const body = (name, labels) => ({
  apiVersion: `${group}/${version}`, kind: 'SandboxClaim',
  metadata: { name, labels },
  spec: { warmPoolRef: { name: 'sandboxd-pool' } },
});
const claims = { group, version, namespace, plural: 'sandboxclaims' };

step('list: the resourceVersion a watch starts from');
const before = await co.listNamespacedCustomObject(claims);
const rv0 = before.metadata.resourceVersion;
assert.ok(Number(rv0) > 0);

step('watch, then create: the watch sees ADDED and then Ready');
const events = [];
const w = new k8s.Watch(kc);
let readySeen;
const readyP = new Promise((resolve) => { readySeen = resolve; });
const wreq = await w.watch(`/apis/${group}/${version}/namespaces/${namespace}/sandboxclaims`,
  { resourceVersion: rv0, fieldSelector: 'metadata.name=node-claim' },
  (type, obj) => {
    events.push([type, obj.metadata?.name, ready(obj)?.status]);
    if (type === 'MODIFIED' && ready(obj)?.status === 'True') readySeen(obj);
  },
  (err) => { if (err && err.name !== 'AbortError') console.log('watch ended:', err.message); });
const created = await co.createNamespacedCustomObject({ ...claims,
  body: body('node-claim', { 'sbx.test/owner': 'client-node' }) });
assert.equal(created.metadata.name, 'node-claim');
assert.ok(created.metadata.uid);
const readyObj = await Promise.race([readyP,
  new Promise((_, rej) => setTimeout(() => rej(new Error('no Ready in 20 s')), 20000))]);
wreq.abort();
assert.deepEqual(events[0].slice(0, 2), ['ADDED', 'node-claim']);
assert.ok(readyObj.status.sandbox.name, 'bound to a sandbox');
console.log('events:', JSON.stringify(events));

step('a second create is 409 AlreadyExists');
const dup = await expectCode(co.createNamespacedCustomObject({ ...claims,
  body: body('node-claim', {}) }), 409, 'duplicate create');
assert.equal(JSON.parse(dup.body).reason, 'AlreadyExists');

step('get, and list with a label selector');
const got = await co.getNamespacedCustomObject({ ...claims, name: 'node-claim' });
assert.equal(got.status.sandbox.name, readyObj.status.sandbox.name);
await co.createNamespacedCustomObject({ ...claims, body: body('node-other', { 'sbx.test/owner': 'other' }) });
const sel = await co.listNamespacedCustomObject({ ...claims, labelSelector: 'sbx.test/owner=client-node' });
assert.deepEqual(sel.items.map((o) => o.metadata.name), ['node-claim']);
const all = await co.listNamespacedCustomObject({ ...claims, labelSelector: 'sbx.test/owner' });
assert.deepEqual(all.items.map((o) => o.metadata.name).sort(), ['node-claim', 'node-other']);

step('merge patch, then a stale replace is 409 Conflict');
const stale = await co.getNamespacedCustomObject({ ...claims, name: 'node-other' });
const patched = await co.patchNamespacedCustomObject({ ...claims, name: 'node-other',
  body: { metadata: { labels: { patched: 'yes' } } } },
k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
assert.equal(patched.metadata.labels.patched, 'yes');
assert.equal(patched.metadata.labels['sbx.test/owner'], 'other');
stale.metadata.labels.stale = 'yes';
const conflict = await expectCode(co.replaceNamespacedCustomObject({ ...claims, name: 'node-other',
  body: stale }), 409, 'stale replace');
assert.equal(JSON.parse(conflict.body).reason, 'Conflict');

step('delete; get is then 404');
await co.deleteNamespacedCustomObject({ ...claims, name: 'node-claim' });
await co.deleteNamespacedCustomObject({ ...claims, name: 'node-other' });
await expectCode(co.getNamespacedCustomObject({ ...claims, name: 'node-claim' }), 404, 'get after delete');
const sandboxes = await co.listNamespacedCustomObject({ group: 'agents.x-k8s.io', version,
  namespace, plural: 'sandboxes' });
assert.ok(!sandboxes.items.some((s) => s.metadata.name === readyObj.status.sandbox.name),
  'the bound sandbox went with its claim');

step('a watch from a compacted resourceVersion gets 410 Expired');
await control('compact');
const gone = await new Promise((resolve, reject) => {
  w.watch(`/apis/${group}/${version}/namespaces/${namespace}/sandboxclaims`,
    { resourceVersion: rv0 },
    (type, obj) => { if (type === 'ERROR') resolve(obj); },
    (err) => { if (err) reject(err); }).catch(reject);
  setTimeout(() => reject(new Error('no ERROR event')), 10000);
});
assert.equal(gone.code, 410);
assert.equal(gone.reason, 'Expired');

step('a wrong token is 401');
const bad = new k8s.KubeConfig();
bad.loadFromFile(process.env.KUBECONFIG);
bad.users[0].token = 'wrong';
await expectCode(bad.makeApiClient(k8s.CustomObjectsApi).listNamespacedCustomObject(claims),
  401, 'wrong token');
console.log('client-node: all steps passed');
process.exit(0);
