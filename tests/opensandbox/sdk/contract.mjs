// contract.mjs SPEC_DIR REQUESTS.json - every request the opensandbox
// provider sent (as fake_opensandbox.py logged them) must validate against
// the published OpenAPI documents: lifecycle calls against
// sandbox-lifecycle.yml, execd calls against execd-api.yaml, sidecar calls
// against egress-api.yaml. Checked: the operation exists (path and method),
// every query parameter is declared (required ones present, types,
// repeatable only when an array), the JSON body validates against the
// request schema (types, required fields, enums, minimum, minItems,
// patterns, oneOf, no undeclared fields where additionalProperties is not
// allowed), and multipart uploads carry a metadata part that validates as
// FileMetadata.
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { deref, findOperation } from './openapi_walk.mjs'

const [specDir, logFile] = process.argv.slice(2)
const docs = {
  lifecycle: parse(readFileSync(`${specDir}/sandbox-lifecycle.yml`, 'utf8')),
  execd: parse(readFileSync(`${specDir}/execd-api.yaml`, 'utf8')),
  egress: parse(readFileSync(`${specDir}/egress-api.yaml`, 'utf8')),
}
const requests = JSON.parse(readFileSync(logFile, 'utf8')).requests
const errors = []
const seen = new Set()
const fail = (req, msg) => errors.push(`${req.service} ${req.method} ${req.path}: ${msg}`)

// Errors of value against schema, as strings (empty: it validates).
function check (doc, schema, value, where) {
  schema = deref(doc, schema)
  if (!schema || Object.keys(schema).length === 0) return []
  if (schema.oneOf) {
    const fits = schema.oneOf.filter((s) => check(doc, s, value, where).length === 0)
    return fits.length === 1 ? [] : [`${where}: ${JSON.stringify(value)} matches ${fits.length} of oneOf`]
  }
  if (schema.allOf) return schema.allOf.flatMap((s) => check(doc, s, value, where))
  const t = schema.type
  if (value === null) return t === 'null' || schema.nullable ? [] : [`${where}: null is not allowed`]
  const actual = Array.isArray(value) ? 'array' : typeof value
  const out = []
  if (t === 'null') return [`${where}: want null`]
  if (t === 'integer') {
    if (!Number.isInteger(value)) return [`${where}: want an integer, got ${JSON.stringify(value)}`]
    if (schema.minimum !== undefined && value < schema.minimum) out.push(`${where}: ${value} below ${schema.minimum}`)
    if (schema.maximum !== undefined && value > schema.maximum) out.push(`${where}: ${value} above ${schema.maximum}`)
  } else if (t === 'string') {
    if (actual !== 'string') return [`${where}: want a string, got ${actual}`]
    if (schema.enum && !schema.enum.includes(value)) out.push(`${where}: ${value} is not one of ${schema.enum}`)
    if (schema.pattern && !new RegExp(schema.pattern).test(value)) out.push(`${where}: ${value} does not match ${schema.pattern}`)
    if (schema.maxLength !== undefined && value.length > schema.maxLength) out.push(`${where}: longer than ${schema.maxLength}`)
  } else if (t === 'boolean') {
    if (actual !== 'boolean') out.push(`${where}: want a boolean, got ${actual}`)
  } else if (t === 'array') {
    if (actual !== 'array') return [`${where}: want an array, got ${actual}`]
    if (schema.minItems !== undefined && value.length < schema.minItems) out.push(`${where}: fewer than ${schema.minItems} items`)
    if (schema.items) value.forEach((v, i) => out.push(...check(doc, schema.items, v, `${where}[${i}]`)))
  } else if (t === 'object' || schema.properties || schema.additionalProperties !== undefined) {
    if (actual !== 'object') return [`${where}: want an object, got ${actual}`]
    for (const r of schema.required || []) if (!(r in value)) out.push(`${where}: required field ${r} is missing`)
    for (const [k, v] of Object.entries(value)) {
      if (schema.properties && k in schema.properties) out.push(...check(doc, schema.properties[k], v, `${where}.${k}`))
      else if (schema.additionalProperties && schema.additionalProperties !== true) out.push(...check(doc, schema.additionalProperties, v, `${where}.${k}`))
      else if (schema.additionalProperties !== true && !(schema.additionalProperties === undefined && !schema.properties)) out.push(`${where}: field ${k} is not in the schema`)
    }
  }
  return out
}

function scalarOk (schema, v) {
  if (schema.type === 'integer') return /^-?\d+$/.test(v) && (schema.minimum === undefined || Number(v) >= schema.minimum)
  if (schema.type === 'boolean') return v === 'true' || v === 'false'
  if (schema.pattern) return new RegExp(schema.pattern).test(v)
  return true
}

// The service a logged request went to, and its path below that service.
function route (req) {
  const url = new URL(req.path, 'http://fake')
  let path = url.pathname
  let service = req.service
  const m = path.match(/^(?:\/v1\/sandboxes\/[^/]+\/proxy|\/sandboxes\/[^/]+\/port)\/(\d+)(\/.*)?$/)
  if (m) path = m[2] || '/'
  else if (path.startsWith('/v1/')) path = path.slice(3)
  return { service, path, url }
}

for (const req of requests) {
  const { service, path, url } = route(req)
  const doc = docs[service]
  if (!doc) { fail(req, `unknown service ${service}`); continue }
  const found = findOperation(doc, req.method, path)
  if (!found) { fail(req, 'no such operation in the spec'); continue }
  seen.add(`${service} ${req.method} ${found.tmpl}`)
  const params = [...(found.item.parameters || []), ...(found.op.parameters || [])].map((p) => deref(doc, p))
  const query = params.filter((p) => p.in === 'query')
  const counts = {}
  for (const [k, v] of url.searchParams) {
    counts[k] = (counts[k] || 0) + 1
    const p = query.find((q) => q.name === k)
    if (!p) { fail(req, `query parameter ${k} is not declared`); continue }
    const s = deref(doc, p.schema) || {}
    const item = s.type === 'array' ? deref(doc, s.items) || {} : s
    if (!scalarOk(item, v)) fail(req, `query parameter ${k}=${v} does not fit its schema`)
  }
  for (const p of query) {
    const s = deref(doc, p.schema) || {}
    if (p.required && !counts[p.name]) fail(req, `required query parameter ${p.name} is missing`)
    if (counts[p.name] > 1 && s.type !== 'array') fail(req, `query parameter ${p.name} repeated`)
  }
  const rb = deref(doc, found.op.requestBody)
  const ctype = (req.content_type || '').split(';')[0].trim()
  if (rb && rb.required && req.body == null && !ctype) fail(req, 'the request body is required')
  if (req.body == null) continue
  if (!rb) { fail(req, 'a body was sent to an operation that takes none'); continue }
  if (ctype === 'multipart/form-data') {
    if (!rb.content['multipart/form-data']) { fail(req, 'multipart is not accepted here'); continue }
    if (!req.body.metadata) { fail(req, 'no metadata part'); continue }
    for (const e of check(doc, doc.components.schemas.FileMetadata, req.body.metadata, 'metadata')) fail(req, e)
    continue
  }
  const media = rb.content['application/json']
  if (!media) { fail(req, `content type ${ctype || '(none)'} is not accepted`); continue }
  if (ctype !== 'application/json') fail(req, `content type ${ctype || '(none)'}, want application/json`)
  for (const e of check(doc, media.schema, req.body, 'body')) fail(req, e)
}

// What must have been exercised for the check to mean something.
const want = [
  'lifecycle POST /sandboxes', 'lifecycle GET /sandboxes', 'lifecycle GET /sandboxes/{sandboxId}',
  'lifecycle DELETE /sandboxes/{sandboxId}', 'lifecycle GET /sandboxes/{sandboxId}/endpoints/{port}',
  'lifecycle PATCH /sandboxes/{sandboxId}/metadata', 'lifecycle POST /sandboxes/{sandboxId}/renew-expiration',
  'execd POST /command', 'execd DELETE /command', 'execd GET /files/info', 'execd POST /files/upload',
  'execd GET /files/download', 'execd POST /files/mv', 'execd POST /directories',
  'egress GET /policy', 'egress PATCH /policy', 'egress DELETE /policy',
]
for (const w of want) if (![...seen].includes(w)) errors.push(`not exercised: ${w}`)
if (errors.length) {
  console.error(errors.slice(0, 60).join('\n'))
  console.error(`contract: ${errors.length} problem(s) in ${requests.length} requests`)
  process.exit(1)
}
console.log(`contract: ${requests.length} requests validate (${seen.size} operations)`)
