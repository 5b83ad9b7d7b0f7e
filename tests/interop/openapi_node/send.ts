// What a TypeScript client generated from /openapi.json by openapi-typescript (its default
// options) writes: a send with only `content`, and the bearer credential the document
// declares. tsc --noEmit must accept it (tests/interop/test_c08_openapi_typescript.py).
import type { components, paths } from "./api";

type Send = components["schemas"]["SendMessage"];
type SendOperation = paths["/api/threads/{id}/messages"]["post"];

export const plain: Send = { content: "hi" };
export const silent: Send = { content: "note", role: "system", silent: true };
export const body: NonNullable<SendOperation["requestBody"]>["content"]["application/json"] = {
  content: "from the operation",
};
