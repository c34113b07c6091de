// contract.mjs SPEC_DIR REQUESTS.json - every request the adapters sent (as
// the fake logged them) must validate against the published documents:
// control plane and /files against openapi.yml / envd.yaml (path, method,
// query parameters, required body fields, types, no undeclared fields),
// Connect RPCs against process.proto / filesystem.proto (the method exists,
// the body has only the request message's fields with the right types,
// enums by name), unary calls with Connect-Protocol-Version: 1.
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { deref, findOperation, valueChecker } from './openapi_walk.mjs'

const [specDir, logFile] = process.argv.slice(2)
const api = parse(readFileSync(`${specDir}/openapi.yml`, 'utf8'))
const envd = parse(readFileSync(`${specDir}/envd.yaml`, 'utf8'))
const requests = JSON.parse(readFileSync(logFile, 'utf8')).requests
const errors = []
const fail = (req, msg) => errors.push(`${req.method} ${req.path}: ${msg}`)
const checkValue = valueChecker(fail)

// ---- OpenAPI -------------------------------------------------------------
function checkHttp (doc, req, url) {
  const found = findOperation(doc, req.method, url.pathname)
  if (!found) return fail(req, 'no such operation in the spec')
  const params = [...(found.item.parameters || []), ...(found.op.parameters || [])].map((p) => deref(doc, p))
  const query = params.filter((p) => p.in === 'query')
  for (const [k] of url.searchParams) {
    if (!query.some((p) => p.name === k)) fail(req, `query parameter ${k} is not declared`)
  }
  for (const p of query) {
    if (p.required && !url.searchParams.has(p.name)) fail(req, `required query parameter ${p.name} is missing`)
  }
  const state = url.searchParams.get('state')
  if (state) {
    const p = query.find((q) => q.name === 'state')
    for (const s of state.split(',')) checkValue(doc, req, p.schema.items, s, 'query.state')
  }
  const rb = deref(doc, found.op.requestBody)
  if (req.body !== null && req.body !== undefined) {
    const media = rb && rb.content && rb.content['application/json']
    if (!media) return fail(req, 'sends a JSON body the operation does not take')
    checkValue(doc, req, media.schema, req.body, 'body')
  } else if (rb && rb.required && !(rb.content && rb.content['application/octet-stream']) &&
             url.pathname !== '/files') {
    fail(req, 'the operation requires a body')
  }
}

// ---- protobuf (just the subset the .proto files use) ---------------------
function parseProto (text) {
  const pkg = /package\s+(\w+);/.exec(text)[1]
  const messages = {}
  const enums = {}
  const rpcs = {}
  for (const m of text.matchAll(/rpc\s+(\w+)\((stream\s+)?(\w+)\)\s+returns\s+\((stream\s+)?(\w+)\)/g)) {
    rpcs[m[1]] = { request: m[3], clientStream: !!m[2], serverStream: !!m[4] }
  }
  // Walk blocks with a stack so nested messages get "Outer.Inner" names.
  const tokens = text.replace(/\/\/.*$/gm, '').match(/[A-Za-z_][\w.]*|[{}=;<>,]|\d+/g)
  const stack = []
  for (let i = 0; i < tokens.length; i++) {
    const tk = tokens[i]
    if ((tk === 'message' || tk === 'enum' || tk === 'oneof') && tokens[i + 2] === '{') {
      stack.push({ kind: tk, name: tokens[i + 1] })
      const full = stack.filter((s) => s.kind !== 'oneof').map((s) => s.name).join('.')
      if (tk === 'message') messages[full] = {}
      if (tk === 'enum') enums[full] = []
      i += 2
    } else if (tk === 'service' || tk === 'rpc') {
      let depth = 0
      for (; i < tokens.length; i++) {
        if (tokens[i] === '{') depth++
        if (tokens[i] === '}' && --depth === 0) break
        if (tk === 'rpc' && tokens[i] === ';' && depth === 0) break
      }
    } else if (tk === '}') {
      stack.pop()
    } else if (stack.length && tokens[i + 1] === '=' && stack[stack.length - 1].kind === 'enum') {
      enums[stack.filter((s) => s.kind !== 'oneof').map((s) => s.name).join('.')].push(tk)
      i += 3
    } else if (stack.length && tokens[i + 2] === '=' || (tokens[i + 3] === '=' && /^(optional|repeated)$/.test(tk)) ||
               (tk === 'map' && tokens[i + 1] === '<')) {
      const scope = stack.filter((s) => s.kind !== 'oneof').map((s) => s.name).join('.')
      let label = ''
      let type
      let name
      if (tk === 'map') {
        type = `map<${tokens[i + 2]},${tokens[i + 4]}>`
        name = tokens[i + 6]
        i += 9
      } else {
        if (tk === 'optional' || tk === 'repeated') { label = tk; i++ }
        type = tokens[i]
        name = tokens[i + 1]
        i += 4
      }
      messages[scope][name.replace(/_([a-z])/g, (_, c) => c.toUpperCase())] = { type, label, scope }
    }
  }
  return { pkg, messages, enums, rpcs }
}

const protos = ['process', 'filesystem'].map((n) => parseProto(readFileSync(`${specDir}/${n}.proto`, 'utf8')))

function resolveType (proto, scope, type) {
  const parts = scope.split('.')
  for (let i = parts.length; i >= 0; i--) {
    const cand = [...parts.slice(0, i), type].join('.')
    if (proto.messages[cand]) return { kind: 'message', name: cand }
    if (proto.enums[cand]) return { kind: 'enum', name: cand }
  }
  return { kind: 'scalar', name: type }
}

function checkMessage (proto, req, msgName, value, where) {
  const fields = proto.messages[msgName]
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return fail(req, `${where}: want a ${msgName} object`)
  for (const [k, v] of Object.entries(value)) {
    const f = fields[k]
    if (!f) { fail(req, `${where}: ${msgName} has no field ${k}`); continue }
    if (f.type.startsWith('map<')) {
      if (typeof v !== 'object' || Array.isArray(v)) fail(req, `${where}.${k}: want a map`)
      else for (const [mk, mv] of Object.entries(v)) if (typeof mv !== 'string') fail(req, `${where}.${k}.${mk}: want a string`)
      continue
    }
    const vals = f.label === 'repeated' ? (Array.isArray(v) ? v : (fail(req, `${where}.${k}: want an array`), [])) : [v]
    for (const one of vals) {
      const t = resolveType(proto, f.scope, f.type)
      if (t.kind === 'message') checkMessage(proto, req, t.name, one, `${where}.${k}`)
      else if (t.kind === 'enum') { if (!proto.enums[t.name].includes(one)) fail(req, `${where}.${k}: ${one} is not a ${t.name}`) }
      else if (f.type === 'string') { if (typeof one !== 'string') fail(req, `${where}.${k}: want a string`) }
      else if (f.type === 'bool') { if (typeof one !== 'boolean') fail(req, `${where}.${k}: want a boolean`) }
      else if (f.type === 'bytes') { if (typeof one !== 'string' || !/^[A-Za-z0-9+/_-]*=*$/.test(one)) fail(req, `${where}.${k}: want base64`) }
      else if (/^u?int32$|^sint32$/.test(f.type)) { if (!Number.isInteger(one)) fail(req, `${where}.${k}: want an integer`) }
      else if (/64$/.test(f.type)) { if (!Number.isInteger(one) && !/^-?\d+$/.test(one)) fail(req, `${where}.${k}: want an int64`) }
    }
  }
}

function checkRpc (req, url) {
  const m = /^\/(\w+)\.(\w+)\/(\w+)$/.exec(url.pathname)
  const proto = m && protos.find((p) => p.pkg === m[1])
  const rpc = proto && proto.rpcs[m[3]]
  if (!rpc) return fail(req, 'no such RPC in the .proto files')
  const ct = req.headers['content-type'] || ''
  if (rpc.serverStream || rpc.clientStream) {
    if (!ct.startsWith('application/connect+json')) fail(req, `streaming call with content type ${ct}`)
  } else {
    if (!ct.startsWith('application/json')) fail(req, `unary call with content type ${ct}`)
    if (req.headers['connect-protocol-version'] !== '1') fail(req, 'no Connect-Protocol-Version: 1')
  }
  checkMessage(proto, req, rpc.request, req.body, 'body')
}

let n = 0
for (const req of requests) {
  const url = new URL(req.path, 'http://x')
  n++
  if (/^\/(process|filesystem)\./.test(url.pathname)) checkRpc(req, url)
  else if (url.pathname === '/files') checkHttp(envd, req, url)
  else checkHttp(api, req, url)
}
const seen = new Set(requests.map((r) => `${r.method} ${new URL(r.path, 'http://x').pathname.replace(/\/i[0-9a-f]{20}/, '/{id}')}`))
console.log(`checked ${n} requests, ${seen.size} kinds:\n  ${[...seen].sort().join('\n  ')}`)
if (errors.length) {
  console.error(`${errors.length} requests do not match the specs:\n  ${[...new Set(errors)].join('\n  ')}`)
  process.exit(1)
}
console.log('ok: every request matches the published specs')
