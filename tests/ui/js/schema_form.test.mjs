// Unit tests of schema_form.js with Node's own test runner (node --test): the playground's
// form from a JSON schema, without a browser. Run by tests/ui/test_ui_units.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

const source = new URL("../../../src/threadloom/server/ui/static/js/schema_form.js", import.meta.url);
const { fieldsOf, collect, initialValue } = await import(
  `data:text/javascript,${encodeURIComponent(await readFile(source, "utf8"))}`
);

// a schema as pydantic writes a tool's parameters
const schema = {
  type: "object",
  properties: {
    order_id: { type: "string", description: "The order" },
    count: { type: "integer", default: 1 },
    ratio: { anyOf: [{ type: "number" }, { type: "null" }], default: null },
    express: { type: "boolean" },
    size: { enum: ["s", "m", "l"], type: "string" },
    level: { enum: [1, 2, 3] },
    tags: { type: "array", items: { type: "string" } },
    address: { type: "object", properties: { city: { type: "string" } } },
    either: { anyOf: [{ type: "string" }, { type: "integer" }] },
  },
  required: ["order_id", "size"],
};

test("each property becomes a field of its kind, in order, with required and defaults", () => {
  const fields = fieldsOf(schema);
  assert.deepEqual(
    fields.map((f) => [f.name, f.kind, f.required]),
    [
      ["order_id", "string", true],
      ["count", "integer", false],
      ["ratio", "number", false],
      ["express", "boolean", false],
      ["size", "enum", true],
      ["level", "enum", false],
      ["tags", "json", false],
      ["address", "json", false],
      ["either", "json", false],
    ],
  );
  assert.equal(fields[0].description, "The order");
  assert.deepEqual(fields[4].options, ["s", "m", "l"]);
  assert.equal(initialValue(fields[1]), "1");
  assert.equal(initialValue(fields[2]), "");
  assert.equal(initialValue(fields[3]), false);
});

test("typed values make the arguments with their JSON types; empty optional fields are left out", () => {
  const fields = fieldsOf(schema);
  const { arguments: args, errors } = collect(fields, {
    order_id: "A-1",
    count: " 3 ",
    ratio: "",
    express: true,
    size: "m",
    level: "2",
    tags: '["x", "y"]',
    address: "",
    either: "7",
  });
  assert.deepEqual(errors, {});
  assert.deepEqual(args, { order_id: "A-1", count: 3, express: true, size: "m", level: 2, tags: ["x", "y"], either: 7 });
});

test("a missing required value, a bad number and bad JSON are errors naming the field", () => {
  const fields = fieldsOf(schema);
  const { errors } = collect(fields, { order_id: " ", count: "2.5", ratio: "abc", size: "xl", tags: "[1," });
  assert.deepEqual(errors, {
    order_id: "is required",
    count: "must be a whole number",
    ratio: "must be a number",
    size: "must be one of the choices",
    tags: "must be JSON",
  });
});

test("a schema without properties asks for nothing", () => {
  assert.deepEqual(fieldsOf({ type: "object" }), []);
  assert.deepEqual(fieldsOf(null), []);
  assert.deepEqual(collect([], {}), { arguments: {}, errors: {} });
});
