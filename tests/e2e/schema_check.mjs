// A JSON-schema validator for the keywords the structured-output and tool
// tests use (type, enum, const, anyOf, properties, required,
// additionalProperties false, items, min/maxItems, min/maxLength, pattern).
// Returns the first error, or null when v validates.
export function validate(schema, v, at = '$') {
  const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  if (schema.enum) return schema.enum.some((e) => eq(e, v)) ? null : `${at}: ${JSON.stringify(v)} not in enum`;
  if ('const' in schema) return eq(schema.const, v) ? null : `${at}: not the const`;
  if (schema.anyOf) return schema.anyOf.some((s) => !validate(s, v, at)) ? null : `${at}: matches no anyOf`;
  const types = schema.type === undefined ? null : [].concat(schema.type);
  const is = (t) => ({
    object: v !== null && typeof v === 'object' && !Array.isArray(v),
    array: Array.isArray(v),
    string: typeof v === 'string',
    integer: Number.isInteger(v),
    number: typeof v === 'number' && Number.isFinite(v),
    boolean: typeof v === 'boolean',
    null: v === null,
  })[t];
  if (types && !types.some(is)) return `${at}: ${JSON.stringify(v)} is not ${types.join('|')}`;
  if (typeof v === 'string') {
    const len = [...v].length;
    if (schema.minLength !== undefined && len < schema.minLength) return `${at}: shorter than minLength`;
    if (schema.maxLength !== undefined && len > schema.maxLength) return `${at}: longer than maxLength`;
    if (schema.pattern && !new RegExp(schema.pattern, 'u').test(v)) return `${at}: does not match ${schema.pattern}`;
  }
  if (Array.isArray(v)) {
    if (schema.minItems !== undefined && v.length < schema.minItems) return `${at}: fewer than minItems`;
    if (schema.maxItems !== undefined && v.length > schema.maxItems) return `${at}: more than maxItems`;
    if (schema.items) {
      for (let i = 0; i < v.length; ++i) {
        const e = validate(schema.items, v[i], `${at}[${i}]`);
        if (e) return e;
      }
    }
  }
  if (is('object') && (schema.properties || schema.required)) {
    for (const k of schema.required ?? []) if (!(k in v)) return `${at}: missing ${k}`;
    for (const [k, x] of Object.entries(v)) {
      const sub = schema.properties?.[k];
      if (!sub) {
        if (schema.additionalProperties === false) return `${at}: extra property ${k}`;
        continue;
      }
      const e = validate(sub, x, `${at}.${k}`);
      if (e) return e;
    }
  }
  return null;
}

