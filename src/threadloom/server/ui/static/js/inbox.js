// The approvals inbox (spec 14 §14.9): the tool calls awaiting a person across every thread
// the viewer may act on (GET /api/approvals), newest first, with their thread, agent,
// tool, arguments and hash. Approve / Reject decide through the thread's own route (POST
// /api/threads/{id}/approvals/{call}), naming the hash of the arguments shown; arguments
// edited in the box are sent as the approval's edited arguments (spec 14 §14.3 rule 5),
// which the server checks against the tool's schema. The list is read again every few
// seconds and after each decision, so a call decided elsewhere leaves it. An admin also
// sees each user's budget (quota, spec 15 §15.4) with what is spent in its window.
import { api, el, clear, pretty, toast, fullTime } from "./api.js";

const list = document.getElementById("inbox-list");
const note = document.getElementById("inbox-note");
const statusPick = document.getElementById("inbox-status");
const agentPick = document.getElementById("inbox-agent");
const who = document.getElementById("who");
const isAdmin = who && who.dataset.admin === "true";
const REFRESH_MS = 5000;
let offset = 0;
const LIMIT = 50;

async function load() {
  const query = { status: statusPick.value, agent_id: agentPick.value.trim(), limit: LIMIT, offset };
  const page = await api("/api/approvals", { query });
  // cards being edited (a reason or arguments typed) stay as they are
  const keep = new Map();
  for (const card of list.querySelectorAll("li.inbox-item")) {
    if (card.dataset.dirty === "true" || card.contains(document.activeElement)) keep.set(card.dataset.key, card);
  }
  const cards = page.approvals.map((a) => keep.get(key(a)) || card(a));
  clear(list).append(...cards);
  note.textContent = page.total
    ? `${page.total} ${statusPick.value === "pending" ? "awaiting a decision" : "listed"}` +
      (page.hasMore || offset ? ` · showing ${offset + 1}–${offset + page.approvals.length}` : "")
    : statusPick.value === "pending" ? "No tool call is awaiting a decision." : "Nothing listed.";
  document.getElementById("inbox-prev").disabled = offset === 0;
  document.getElementById("inbox-next").disabled = !page.hasMore;
  list.removeAttribute("aria-busy");
}

const key = (a) => `${a.thread_id}/${a.tool_call_id}`;

function card(a) {
  const id = `${a.thread_id}-${a.tool_call_id}`.replace(/[^A-Za-z0-9_-]/g, "_");
  const shown = pretty(a.arguments);
  const pending = a.state === "pending";
  const args = el("textarea", { id: `args-${id}`, class: "json mono inbox-arguments", rows: Math.min(12, shown.split("\n").length + 1), spellcheck: "false", readonly: !pending }, shown);
  const reason = el("input", { id: `reason-${id}`, type: "text", class: "approval-reason", maxlength: 10000, placeholder: "Optional" });
  const approve = el("button", { type: "button", class: "primary" }, "Approve");
  const reject = el("button", { type: "button", class: "danger" }, "Reject");
  const problem = el("div", { class: "play-error small", role: "alert" });
  const item = el("li", { class: "approval inbox-item", dataset: { key: key(a), callId: a.tool_call_id, tool: a.tool, hash: a.arguments_hash, state: a.state }, "aria-label": `${a.tool} in thread ${a.thread_id}` },
    el("div", { class: "approval-head" },
      el("span", { class: "tool-name" }, a.tool),
      el("span", { class: `badge badge-approval-${a.state}` }, pending ? "awaiting approval" : a.state),
      el("span", { class: "muted small" }, "agent ", el("code", {}, a.agent_id)),
      el("a", { href: `/threads/${a.thread_id}`, class: "small" }, "thread ", a.thread_id.slice(0, 8)),
      el("span", { class: "muted small" }, fullTime(Math.floor(a.requested_at / 1000)))),
    el("label", { class: "label", for: `args-${id}` }, pending ? "Arguments (edit to approve other values)" : "Arguments"),
    args,
    el("div", { class: "approval-hash muted small mono", title: a.arguments_hash }, a.arguments_hash),
    pending ? el("div", { class: "approval-actions" }, el("label", { for: `reason-${id}` }, "Reason"), reason, approve, reject) :
      el("p", { class: "muted small" }, a.decided_by ? `${a.state} by ${a.decided_by}` : a.state, a.reason ? `: ${a.reason}` : ""),
    problem);
  const dirty = () => { item.dataset.dirty = "true"; };
  args.addEventListener("input", dirty);
  reason.addEventListener("input", dirty);
  const decide = async (yes) => {
    const body = yes ? { approve: true, arguments_hash: a.arguments_hash } : { approve: false };
    if (yes && args.value.trim() !== shown.trim()) {
      try {
        body.arguments = JSON.parse(args.value);
      } catch {
        problem.textContent = "The arguments are not valid JSON.";
        args.focus();
        return;
      }
    }
    if (reason.value.trim()) body.reason = reason.value.trim();
    approve.disabled = reject.disabled = true;
    try {
      await api(`/api/threads/${a.thread_id}/approvals/${encodeURIComponent(a.tool_call_id)}`, { method: "POST", body });
      toast(`${a.tool}: ${yes ? "approved" : "rejected"}`);
      item.dataset.dirty = "false";
      const next = item.nextElementSibling || item.previousElementSibling;
      item.remove();
      (next?.querySelector("button.primary") || statusPick).focus();
      await load();
    } catch (err) {
      problem.textContent = `Not decided: ${err.message}`;
      approve.disabled = reject.disabled = false;
      if (err.status === 404 || err.status === 409) {
        item.dataset.dirty = "false";
        await load();
      }
    }
  };
  approve.addEventListener("click", () => decide(true));
  reject.addEventListener("click", () => decide(false));
  return item;
}

async function budgets() {
  const box = document.getElementById("budgets");
  if (!isAdmin || !box) return;
  let users;
  try {
    users = (await api("/api/users")).users || [];
  } catch {
    return;
  }
  const rows = [];
  for (const u of users) {
    let q;
    try {
      q = await api(`/api/users/${u.id}/quota`);
    } catch {
      continue;
    }
    if (!q.quota) continue;
    const spent = q.spent || {};
    const cell = (limit, used, unit) => (limit === null || limit === undefined ? "—" : `${unit === "usd" ? "$" : ""}${used ?? 0} of ${unit === "usd" ? "$" : ""}${limit}`);
    rows.push(el("tr", { dataset: { user: u.id } },
      el("th", { scope: "row" }, u.username || u.id),
      el("td", {}, cell(q.quota.usd, spent.usd, "usd")),
      el("td", {}, cell(q.quota.tokens, spent.tokens, "tokens")),
      el("td", {}, cell(q.quota.requests, spent.requests, "requests")),
      el("td", {}, q.quota.window || ""),
      el("td", {}, spent.unknown_cost ? `${spent.unknown_cost} unpriced` : "")));
  }
  box.hidden = false;
  const table = document.getElementById("budget-rows");
  clear(table).append(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No user has a budget."))]));
}

statusPick.addEventListener("change", () => { offset = 0; load().catch(fail); });
agentPick.addEventListener("change", () => { offset = 0; load().catch(fail); });
document.getElementById("inbox-refresh").addEventListener("click", () => load().catch(fail));
document.getElementById("inbox-prev").addEventListener("click", () => { offset = Math.max(0, offset - LIMIT); load().catch(fail); });
document.getElementById("inbox-next").addEventListener("click", () => { offset += LIMIT; load().catch(fail); });
function fail(err) {
  toast(err.message, "error");
}
setInterval(() => { if (!document.hidden) load().catch(() => {}); }, REFRESH_MS);
load().catch(fail);
budgets().catch(() => {});
