// The agents page: each agent of the project with its sides, and — for an admin, who may
// read the catalog (spec 08 §8.10) — each side's prompt (system text, variables), model,
// tools with their JSON schemas, MCP servers with their tools, and subagents as a nested
// list (each links to that agent's card; a cycle is shown once and marked). "Start a
// thread" asks for the agent's variables and creates the thread (POST /api/threads).
import { api, el, clear, pretty, toast } from "./api.js";

const who = document.getElementById("who");
const isAdmin = who && who.dataset.admin === "true";
const root = document.getElementById("agents");

async function load() {
  const agents = (await api("/api/agents")).agents;
  let prompts = new Map();
  let tools = {};
  let models = new Map();
  if (isAdmin) {
    const [p, t, m] = await Promise.all([
      api("/api/prompts"),
      api("/api/tools", { query: { type: "tools", schema: "true" } }),
      api("/api/models"),
    ]);
    prompts = new Map(p.prompts.map((x) => [x.id, x]));
    tools = t;
    models = new Map(m.models.map((x) => [x.id, x]));
  } else {
    document.getElementById("agents-note").textContent =
      "Prompts, models and tools are shown to admins.";
  }
  const ctx = { agents: new Map(agents.map((a) => [a.id, a])), prompts, tools, models };
  // the primary agents first, as New thread offers them
  const ordered = [...agents].sort((a, b) => Number(b.primary) - Number(a.primary) || a.id.localeCompare(b.id));
  const index = clear(document.getElementById("agent-index"));
  for (const a of ordered) index.append(el("li", {}, el("a", { href: `#agent-${a.id}` }, a.title || a.id)));
  clear(root).append(...ordered.map((a) => card(a, ctx)));
  root.removeAttribute("aria-busy");
  if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView();
}

function card(a, ctx) {
  const head = el("div", { class: "agent-head" },
    el("h2", { id: `agent-${a.id}-title` }, a.title || a.id),
    el("code", { class: "muted" }, a.id),
    a.primary ? el("span", { class: "badge" }, "primary") : el("span", { class: "badge" }, "subagent"));
  const section = el("section", { class: "agent-card", id: `agent-${a.id}`, "aria-labelledby": `agent-${a.id}-title`, dataset: { agent: a.id } },
    head,
    a.description ? el("p", {}, a.description) : null,
    el("div", { class: "sides" }, side(a, "a", ctx), side(a, "b", ctx)),
    subagentTree(a, ctx),
    starter(a));
  return section;
}

function side(a, which, ctx) {
  const backing = a[`side_${which}_backing`];
  const label = a[`side_${which}_label`];
  const promptId = a[`side_${which}_agent_prompt`];
  const box = el("div", { class: "side", dataset: { side: which } },
    el("h3", {}, `Side ${which.toUpperCase()}`, label ? ` · ${label}` : "", " ", el("span", { class: "badge" }, backing)));
  const prompt = promptId ? ctx.prompts.get(promptId) : null;
  if (!prompt) {
    if (promptId) box.append(el("p", { class: "muted" }, `Prompt ${promptId}`));
    else if (backing === "human") box.append(el("p", { class: "muted" }, "A person writes this side."));
    return box;
  }
  const model = ctx.models.get(prompt.model_id);
  box.append(
    el("dl", { class: "facts" },
      el("dt", {}, "Prompt"), el("dd", {}, el("code", {}, prompt.id)),
      el("dt", {}, "Model"), el("dd", { class: "model" }, el("code", {}, prompt.model_id),
        model ? ` · ${model.provider} ${model.model}` : ` · ${prompt.model_provider}`)),
    el("div", { class: "label" }, "System text"),
    el("pre", { class: "wrap system-text" }, prompt.prompt));
  if (prompt.variables && prompt.variables.length) {
    box.append(el("div", { class: "label" }, "Variables"),
      el("ul", { class: "variables" }, prompt.variables.map((v) =>
        el("li", {}, el("code", {}, `{{${v.name}}}`), ` — ${v.description}`))));
  }
  const own = prompt.tools.filter((name) => ctx.tools[name]);
  if (own.length) {
    box.append(el("div", { class: "label" }, "Tools"),
      el("div", { class: "tool-list" }, own.map((name) => toolFold(name, ctx.tools[name].description, ctx.tools[name].schema))));
  }
  // sub-prompts: prompts offered as tools (their parameters are the prompt's required_schema)
  const subprompts = prompt.tools.filter((name) => !ctx.tools[name] && ctx.prompts.has(name));
  if (subprompts.length) {
    box.append(el("div", { class: "label" }, "Sub-prompts"),
      el("div", { class: "tool-list" }, subprompts.map((name) => {
        const sub = ctx.prompts.get(name);
        return toolFold(name, sub.tool_description, sub.required_schema);
      })));
  }
  if (prompt.mcp_servers && prompt.mcp_servers.length) {
    box.append(el("div", { class: "label" }, "MCP servers"),
      el("ul", { class: "mcp-servers" }, prompt.mcp_servers.map((s) => el("li", { dataset: { server: s.name } },
        el("strong", {}, s.name), ` · ${s.transport}`, s.only ? ` · only ${s.only}` : "",
        s.description ? el("span", { class: "muted" }, ` — ${s.description}`) : null,
        s.tools
          ? el("div", { class: "tool-list" }, s.tools.map((t) => toolFold(t.name, t.description, t.schema)))
          : el("p", { class: "muted small" }, s.error ? `not open: ${s.error}` : "not open yet: its tools are listed once a run opens it")))));
  }
  return box;
}

function toolFold(name, description, schema) {
  return el("details", { class: "tool agent-tool", dataset: { tool: name } },
    el("summary", {}, el("span", { class: "tool-name" }, name),
      description ? el("span", { class: "muted small" }, description) : null),
    el("div", { class: "label" }, "Parameters (JSON schema)"),
    el("pre", { class: "json" }, schema ? pretty(schema) : "—"));
}

// the subagents of an agent's sides, nested: each relationship names an agent, whose own
// subagents follow; an agent already on the path is marked as a cycle and not opened again
function subagentTree(a, ctx) {
  const list = children(a, ctx, new Set([a.id]));
  if (!list) return null;
  return el("div", { class: "subagents" }, el("div", { class: "label" }, "Subagents"), list);
}

function relationships(a, ctx) {
  const out = [];
  for (const which of ["a", "b"]) {
    const prompt = ctx.prompts.get(a[`side_${which}_agent_prompt`]);
    if (prompt && prompt.subagents) out.push(...prompt.subagents);
    else for (const name of a[`side_${which}_subagents`] || []) out.push({ relationship: name, agent: name });
  }
  return out;
}

function children(a, ctx, path) {
  const rels = relationships(a, ctx);
  if (!rels.length) return null;
  return el("ul", { class: "subagent-tree" }, rels.map((r) => {
    const child = ctx.agents.get(r.agent);
    const cycle = path.has(r.agent);
    return el("li", { dataset: { relationship: r.relationship, agent: r.agent } },
      el("code", {}, r.relationship), " → ",
      el("a", { href: `#agent-${r.agent}` }, child ? child.title || child.id : r.agent),
      r.blocking ? el("span", { class: "badge" }, "blocking") : null,
      r.description ? el("span", { class: "muted small" }, ` ${r.description}`) : null,
      cycle ? el("span", { class: "muted small" }, " (cycle)") : null,
      child && !cycle ? children(child, ctx, new Set([...path, r.agent])) : null);
  }));
}

function starter(a) {
  const form = el("form", { class: "inline-form start-thread", "aria-label": `Start a thread with ${a.title || a.id}` });
  for (const v of a.variables || []) {
    const id = `start-${a.id}-${v.name}`;
    form.append(el("label", { for: id }, v.name),
      el("input", { id, required: true, placeholder: v.description, dataset: { argument: v.name } }));
  }
  form.append(el("button", { type: "submit", class: "primary" }, "Start a thread"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { agent_id: a.id };
    const fields = [...form.querySelectorAll("input[data-argument]")];
    if (fields.length) body.arguments = Object.fromEntries(fields.map((f) => [f.dataset.argument, f.value]));
    try {
      const made = await api("/api/threads", { method: "POST", body });
      location.assign(`/threads/${made.threadId}`);
    } catch (err) {
      toast(err.message, "error");
    }
  });
  return form;
}

load().catch((err) => {
  root.removeAttribute("aria-busy");
  clear(root).append(el("p", { class: "error" }, err.message));
});
