// contract.mjs SPEC_DIR REQUESTS.json [MORE.jsonl...] - every request the daytona provider
// sent (as fake_daytona.py logged them) must validate against the
// published documents: API calls against openapi.yaml (OpenAPI 3),
// toolbox calls against swagger.yaml (Swagger 2.0): the operation exists,
// query parameters are declared, typed and the required ones present, path
// parameters are non-empty, a JSON body matches its schema (required
// fields, types, enums, no undeclared fields), a form-data operation gets
// multipart/form-data, and a body is sent where one is required.
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { deref, findOperation, valueChecker } from './openapi_walk.mjs'

const [specDir, logFile, ...lineFiles] = process.argv.slice(2)
const api = parse(readFileSync(`${specDir}/openapi.yaml`, 'utf8'))
const toolbox = parse(readFileSync(`${specDir}/swagger.yaml`, 'utf8'))
const requests = JSON.parse(readFileSync(logFile, 'utf8')).requests
// more requests, one JSON object a line (fake_daytona.py's SBX_FAKE_DAYTONA_LOG)
for (const f of lineFiles) {
  for (const line of readFileSync(f, 'utf8').split('\n')) if (line) requests.push(JSON.parse(line))
}
const errors = []
const fail = (req, msg) => errors.push(`${req.method} ${req.path.split('?')[0]}: ${msg}`)
const checkValue = valueChecker(fail, { xNullable: true, numbers: true })

// A query or path parameter's text against its declared type.
function checkParam (doc, req, p, text) {
  const type = p.type || (deref(doc, p.schema) || {}).type
  const where = `${p.in}.${p.name}`
  if (type === 'boolean' && !/^(true|false)$/.test(text)) fail(req, `${where}: want true or false, got ${text}`)
  if (type === 'integer' && !/^-?\d+$/.test(text)) fail(req, `${where}: want an integer, got ${text}`)
  if (type === 'number' && Number.isNaN(Number(text))) fail(req, `${where}: want a number, got ${text}`)
  if (p.in === 'path' && text === '') fail(req, `${where}: empty`)
}

function check (doc, req, path, search) {
  const found = findOperation(doc, req.method, path)
  if (!found) return fail(req, 'no such operation in the spec')
  const params = [...(found.item.parameters || []), ...(found.op.parameters || [])].map((p) => deref(doc, p))
  const query = params.filter((p) => p.in === 'query')
  for (const [k, v] of search) {
    const p = query.find((q) => q.name === k)
    if (!p) fail(req, `query parameter ${k} is not declared`)
    else checkParam(doc, req, p, v)
  }
  for (const p of query) {
    if (p.required && !search.has(p.name)) fail(req, `required query parameter ${p.name} is missing`)
  }
  const ct = (req.headers['content-type'] || '').split(';')[0].trim()
  const swagger = !!doc.swagger
  if (swagger) {
    const bodyParam = params.find((p) => p.in === 'body')
    const form = params.some((p) => p.in === 'formData') || (found.op.consumes || []).includes('multipart/form-data')
    if (form && ct !== 'multipart/form-data') fail(req, `form-data operation sent as ${ct || 'no content type'}`)
    if (req.body !== null && req.body !== undefined) {
      if (!bodyParam) return fail(req, 'sends a JSON body the operation does not take')
      checkValue(doc, req, bodyParam.schema, req.body, 'body')
    } else if (bodyParam && bodyParam.required) {
      fail(req, 'the operation requires a body')
    }
  } else {
    const rb = deref(doc, found.op.requestBody)
    if (req.body !== null && req.body !== undefined) {
      const media = rb && rb.content && rb.content['application/json']
      if (!media) return fail(req, 'sends a JSON body the operation does not take')
      checkValue(doc, req, media.schema, req.body, 'body')
    } else if (rb && rb.required) {
      fail(req, 'the operation requires a body')
    }
  }
}

let n = 0
const seen = new Set()
for (const req of requests) {
  const url = new URL(req.path, 'http://x')
  n++
  if (req.kind === 'toolbox') {
    const m = /^\/toolbox\/[^/]+(\/.*)$/.exec(url.pathname)
    if (!m) { fail(req, 'not a toolbox path'); continue }
    seen.add(`toolbox ${req.method} ${m[1].replace(/^\/process\/session\/[^/]+/, '/process/session/{sessionId}')}`)
    check(toolbox, req, m[1], url.searchParams)
  } else {
    const p = url.pathname.replace(/^\/api/, '')
    seen.add(`api ${req.method} ${p.replace(/^\/sandbox\/[^/]+/, '/sandbox/{id}')}`)
    check(api, req, p, url.searchParams)
  }
}
console.log(`checked ${n} requests, ${seen.size} kinds:\n  ${[...seen].sort().join('\n  ')}`)
if (errors.length) {
  console.error(`${errors.length} requests do not match the specs:\n  ${[...new Set(errors)].join('\n  ')}`)
  process.exit(1)
}
if (n === 0) {
  console.error('no requests were logged')
  process.exit(1)
}
console.log('ok: every request matches the published specs')
