// The tool playground (spec 08 §8.10.7, admins): the project's tools (GET /api/tools with
// their schemas), a form generated from the chosen tool's JSON schema (schema_form.js),
// and Call, which runs the tool in a new scratch thread (tagged "playground") or in a
// thread whose id is given (POST /api/tools/{name}/call). The result is shown with the
// log row that records the call (GET /api/threads/{id}/logs/{log_id}) and a link to the
// thread. A tool that needs a person's approval is refused by the server, and says so.
import { api, el, clear, pretty, toast } from "./api.js";
import { fieldsOf, collect, initialValue } from "./schema_form.js";

const picker = document.getElementById("tool-picker");
const form = document.getElementById("tool-form");
const fieldsBox = document.getElementById("tool-fields");
const describe = document.getElementById("tool-description");
const threadInput = document.getElementById("tool-thread");
const out = document.getElementById("tool-result");
let tools = {};
let fields = [];

async function load() {
  tools = await api("/api/tools", { query: { type: "tools", schema: "true" } });
  const names = Object.keys(tools).filter((n) => !tools[n].hasError).sort();
  clear(picker).append(...names.map((n) => el("option", { value: n }, n)));
  const wanted = new URLSearchParams(location.search).get("tool");
  if (wanted && names.includes(wanted)) picker.value = wanted;
  form.hidden = names.length === 0;
  if (!names.length) describe.textContent = "This project has no tools.";
  else show(picker.value);
}

function input(f) {
  const id = `arg-${f.name}`;
  const start = initialValue(f);
  let control;
  if (f.kind === "boolean") {
    control = el("input", { id, type: "checkbox", name: f.name, checked: start === true });
  } else if (f.kind === "enum") {
    control = el("select", { id, name: f.name },
      f.required ? null : el("option", { value: "" }, "—"),
      ...f.options.map((o) => el("option", { value: String(o), selected: String(o) === start }, String(o))));
  } else if (f.kind === "json") {
    control = el("textarea", { id, name: f.name, rows: 3, class: "mono", spellcheck: "false", placeholder: "JSON" }, start);
  } else {
    control = el("input", {
      id, name: f.name, value: start,
      type: f.kind === "string" ? "text" : "text",
      inputmode: f.kind === "integer" ? "numeric" : f.kind === "number" ? "decimal" : null,
    });
  }
  if (f.required) control.setAttribute("aria-required", "true");
  const hintId = `${id}-hint`;
  control.setAttribute("aria-describedby", hintId);
  return el("div", { class: "play-field", dataset: { field: f.name, kind: f.kind } },
    el("label", { for: id }, f.name, f.required ? el("span", { class: "required", "aria-hidden": "true" }, " *") : null,
      " ", el("span", { class: "muted small" }, f.kind)),
    control,
    el("div", { id: hintId, class: "muted small play-hint" }, f.description),
    el("div", { class: "play-error small", role: "alert", id: `${id}-error` }));
}

function show(name) {
  const entry = tools[name];
  if (!entry) return;
  describe.textContent = entry.description || "";
  fields = fieldsOf(entry.schema || {});
  clear(fieldsBox).append(...(fields.length ? fields.map(input) : [el("p", { class: "muted" }, "This tool takes no arguments.")]));
  const url = new URL(location.href);
  url.searchParams.set("tool", name);
  history.replaceState(null, "", url);
}

function values() {
  const got = {};
  for (const f of fields) {
    const control = document.getElementById(`arg-${f.name}`);
    got[f.name] = f.kind === "boolean" ? control.checked : control.value;
  }
  return got;
}

async function call(event) {
  event.preventDefault();
  const name = picker.value;
  const { arguments: args, errors } = collect(fields, values());
  let first = null;
  for (const f of fields) {
    const box = document.getElementById(`arg-${f.name}-error`);
    const control = document.getElementById(`arg-${f.name}`);
    box.textContent = errors[f.name] ? `${f.name} ${errors[f.name]}` : "";
    control.setAttribute("aria-invalid", errors[f.name] ? "true" : "false");
    if (errors[f.name] && !first) first = control;
  }
  if (first) {
    first.focus();
    return;
  }
  const body = { arguments: args };
  if (threadInput.value.trim()) body.thread_id = threadInput.value.trim();
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  clear(out).append(el("p", { class: "muted" }, `Calling ${name}…`));
  try {
    const answer = await api(`/api/tools/${encodeURIComponent(name)}/call`, { method: "POST", body });
    let row = null;
    if (answer.log_id) {
      try {
        row = await api(`/api/threads/${answer.thread_id}/logs/${answer.log_id}`);
      } catch {
        row = null; // a caller without the logs permission sees the result only
      }
    }
    render(answer, row);
  } catch (err) {
    clear(out).append(el("div", { class: "play-outcome error", role: "alert", dataset: { code: err.code || "" } },
      el("strong", {}, err.code === "approval_required" ? "Needs approval" : `Not called (${err.status})`),
      el("p", {}, err.message)));
  } finally {
    button.disabled = false;
  }
}

function render(answer, row) {
  const ok = answer.status === "success";
  const link = el("a", { href: `/threads/${answer.thread_id}` }, answer.created ? "the scratch thread" : "the thread");
  clear(out).append(
    el("div", { class: `play-outcome ${ok ? "success" : "error"}`, role: "status", dataset: { status: answer.status } },
      el("div", { class: "play-outcome-head" },
        el("span", { class: `badge badge-${ok ? "success" : "error"}` }, answer.status),
        el("span", {}, ` ${answer.tool} in ${answer.duration_ms} ms, in `), link),
      el("div", { class: "label" }, ok ? "Result" : "Error"),
      el("pre", { class: "json play-value" }, ok ? pretty(answer.result ?? "") : answer.error || "")),
    row ? el("section", { class: "play-log", "aria-label": "Log row", dataset: { logId: row.id } },
      el("h2", {}, "Log row ", el("code", { class: "small" }, row.id)),
      // the columns the row has (an app row leaves the LLM columns empty)
      el("pre", { class: "json" }, JSON.stringify(readable(row), null, 2))) : null);
  out.querySelector(".play-outcome").focus?.();
}

// the columns the row has (an app row leaves the LLM columns empty), its JSON-text
// columns (app_request, app_response, app_trigger, app_data) shown as the JSON they hold
function readable(row) {
  const shown = {};
  for (const [k, v] of Object.entries(row)) {
    if (v === null) continue;
    if (/^app_(request|response|trigger|data)$/.test(k) && typeof v === "string") {
      try {
        shown[k] = JSON.parse(v);
        continue;
      } catch {
        // not JSON text: shown as it is
      }
    }
    shown[k] = v;
  }
  return shown;
}

picker.addEventListener("change", () => show(picker.value));
form.addEventListener("submit", call);
load().catch((err) => toast(err.message, "error"));
