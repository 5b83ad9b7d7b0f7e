// A form from a tool's JSON schema, without the DOM (unit-tested with node --test): which
// fields a schema asks for, and the arguments object the typed values make. The playground
// page (playground.js) draws the fields and calls the tool (spec 08 §8.10.7).
//
// Kinds: "string", "number", "integer", "boolean", "enum" (a choice of the schema's
// values), and "json" for anything else — objects, arrays, unions — typed as JSON text, so
// no shape of schema is beyond the form. The server checks the arguments against the
// schema again (the tool pipeline), so the form only spares a round trip.

const SCALAR = new Set(["string", "number", "integer", "boolean"]);

// the one non-null type of a property, or null when it has several (or none)
function typeOf(prop) {
  const t = prop.type;
  if (typeof t === "string") return t;
  if (Array.isArray(t)) {
    const rest = t.filter((x) => x !== "null");
    return rest.length === 1 ? rest[0] : null;
  }
  // Optional[int] as pydantic writes it: anyOf [{type: integer}, {type: null}]
  const options = prop.anyOf || prop.oneOf;
  if (Array.isArray(options)) {
    const rest = options.filter((o) => o && o.type !== "null");
    if (rest.length === 1) return typeOf(rest[0]) === null ? null : typeOf(rest[0]);
  }
  return null;
}

function enumOf(prop) {
  if (Array.isArray(prop.enum)) return prop.enum.filter((v) => v !== null);
  const options = prop.anyOf || prop.oneOf;
  if (Array.isArray(options)) {
    const rest = options.filter((o) => o && o.type !== "null");
    if (rest.length === 1 && Array.isArray(rest[0].enum)) return rest[0].enum;
  }
  if ("const" in prop) return [prop.const];
  return null;
}

// The fields of an object schema, in the schema's order: {name, kind, required, title,
// description, default, options (enum values), nullable}.
export function fieldsOf(schema) {
  const props = (schema && typeof schema === "object" && schema.properties) || {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  return Object.entries(props).map(([name, raw]) => {
    const prop = raw && typeof raw === "object" ? raw : {};
    const options = enumOf(prop);
    const type = typeOf(prop);
    let kind = "json";
    if (options && options.every((v) => typeof v === "string" || typeof v === "number")) kind = "enum";
    else if (type && SCALAR.has(type)) kind = type;
    return {
      name,
      kind,
      required: required.has(name),
      title: typeof prop.title === "string" ? prop.title : name,
      description: typeof prop.description === "string" ? prop.description : "",
      default: "default" in prop ? prop.default : undefined,
      options: kind === "enum" ? options : null,
    };
  });
}

// The text an input starts with: the default when the schema has one.
export function initialValue(field) {
  if (field.default === undefined || field.default === null) return field.kind === "boolean" ? false : "";
  if (field.kind === "boolean") return field.default === true;
  if (field.kind === "json") return JSON.stringify(field.default, null, 2);
  return String(field.default);
}

// The arguments the typed values make: {arguments, errors}. `values` maps a field's name
// to what its input holds (a string; a boolean for a checkbox). An empty optional field is
// left out (the tool's default applies); an empty required one is an error, and so is a
// number that is not one, or JSON that does not parse.
export function collect(fields, values) {
  const args = {};
  const errors = {};
  for (const f of fields) {
    const v = values[f.name];
    if (f.kind === "boolean") {
      args[f.name] = v === true || v === "true";
      continue;
    }
    const text = typeof v === "string" ? v : v === undefined || v === null ? "" : String(v);
    if (text.trim() === "") {
      if (f.required) errors[f.name] = "is required";
      continue;
    }
    if (f.kind === "string") args[f.name] = text;
    else if (f.kind === "integer" || f.kind === "number") {
      const n = Number(text.trim());
      if (!Number.isFinite(n)) errors[f.name] = "must be a number";
      else if (f.kind === "integer" && !Number.isInteger(n)) errors[f.name] = "must be a whole number";
      else args[f.name] = n;
    } else if (f.kind === "enum") {
      // the option whose text was chosen, with its JSON type (a number stays a number)
      const found = f.options.find((o) => String(o) === text);
      if (found === undefined) errors[f.name] = "must be one of the choices";
      else args[f.name] = found;
    } else {
      try {
        args[f.name] = JSON.parse(text);
      } catch {
        errors[f.name] = "must be JSON";
      }
    }
  }
  return { arguments: args, errors };
}
