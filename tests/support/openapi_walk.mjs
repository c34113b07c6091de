// openapi_walk.mjs - what the contract checkers of the remote providers'
// fakes share (tests/{daytona,e2b,opensandbox}/sdk/contract.mjs): following
// $refs, finding the operation a request's method and path name in an
// OpenAPI 3 or Swagger 2.0 document, and checking a JSON value against a
// schema. Each run_contract_test.sh copies it beside contract.mjs.

// node with every $ref followed (local "#/..." references only).
export function deref (doc, node) {
  while (node && node.$ref) {
    node = node.$ref.replace(/^#\//, '').split('/').reduce((o, k) => o[k], doc)
  }
  return node
}

// The operation of doc.paths a method and a concrete path match ({param}
// segments match any non-empty segment): { op, item, tmpl }, or null.
export function findOperation (doc, method, path) {
  const segs = path.split('/')
  for (const [tmpl, item] of Object.entries(doc.paths)) {
    const ts = tmpl.split('/')
    if (ts.length !== segs.length) continue
    if (ts.every((t, i) => (t.startsWith('{') && segs[i] !== '') || t === segs[i])) {
      const op = item[method.toLowerCase()]
      if (op) return { op, item, tmpl }
    }
  }
  return null
}

// checkValue(doc, req, schema, value, where): calls fail(req, message) for
// each way value does not match schema (allOf, null, integer with minimum,
// string, boolean, array items, enums, objects: required fields, no
// undeclared ones, additionalProperties). Options: xNullable, Swagger 2's
// x-nullable allows null too; numbers, type number is checked.
export function valueChecker (fail, { xNullable = false, numbers = false } = {}) {
  function checkValue (doc, req, schema, value, where) {
    schema = deref(doc, schema)
    if (!schema) return
    if (schema.allOf) return schema.allOf.forEach((s) => checkValue(doc, req, s, value, where))
    if (value === null) {
      if (!schema.nullable && !(xNullable && schema['x-nullable'])) fail(req, `${where}: null is not allowed`)
      return
    }
    const t = schema.type
    const actual = Array.isArray(value) ? 'array' : typeof value
    if (t === 'integer') {
      if (!Number.isInteger(value)) fail(req, `${where}: want an integer, got ${JSON.stringify(value)}`)
      else if (schema.minimum !== undefined && value < schema.minimum) fail(req, `${where}: below ${schema.minimum}`)
    } else if (numbers && t === 'number') {
      if (typeof value !== 'number') fail(req, `${where}: want a number`)
    } else if (t === 'string' || t === 'boolean' || t === 'array') {
      if (actual !== t) fail(req, `${where}: want ${t}, got ${actual}`)
      if (t === 'array' && schema.items) value.forEach((v, i) => checkValue(doc, req, schema.items, v, `${where}[${i}]`))
      if (schema.enum && !schema.enum.includes(value)) fail(req, `${where}: ${value} is not one of ${schema.enum}`)
    } else if (t === 'object' || schema.properties || schema.additionalProperties) {
      if (actual !== 'object') return fail(req, `${where}: want an object, got ${actual}`)
      for (const r of schema.required || []) {
        if (!(r in value)) fail(req, `${where}: required field ${r} is missing`)
      }
      for (const [k, v] of Object.entries(value)) {
        if (schema.properties && k in schema.properties) {
          checkValue(doc, req, schema.properties[k], v, `${where}.${k}`)
        } else if (schema.additionalProperties) {
          checkValue(doc, req, schema.additionalProperties === true ? {} : schema.additionalProperties, v, `${where}.${k}`)
        } else {
          fail(req, `${where}: field ${k} is not in the schema`)
        }
      }
    }
  }
  return checkValue
}
