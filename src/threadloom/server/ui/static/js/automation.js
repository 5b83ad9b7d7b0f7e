// The automation page (admins; spec 08 §8.15): schedules (timing, target, next fire, last
// outcome; enable/disable, fire now), inbound triggers (the URL to call; enable/disable)
// and outbound webhooks (subscriptions with their recent deliveries, and the dead-letter
// list with Re-deliver). Everything through the existing admin routes; the logic that
// needs no DOM is in automation_model.js.
import { api, el, clear, timeEl, toast } from "./api.js";
import {
  whenText, targetText, nextFire, lastOutcome, triggerUrl, triggerCurl,
  eventTypesText, countByState, recentFirst, attemptText, canRedeliver,
} from "./automation_model.js";

const who = document.getElementById("who");
const isAdmin = who && who.dataset.admin === "true";

function nowUs() {
  return Date.now() * 1000;
}

function failed(what, err) {
  toast(`${what}: ${err.message}`, "error");
}

// a button that runs `action` once per click, disabled meanwhile, then reloads `reload`
function actionButton(label, attrs, action, reload) {
  const button = el("button", { type: "button", ...attrs }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await action();
    } catch (err) {
      failed(label, err);
    } finally {
      button.disabled = false;
      await reload();
    }
  });
  return button;
}

// -- schedules --------------------------------------------------------------------------

async function loadSchedules() {
  const box = document.getElementById("schedules");
  try {
    const { schedules } = await api("/api/schedules");
    const body = schedules.map((s) => scheduleRow(s));
    clear(box).append(schedules.length
      ? el("table", { class: "auto-table", "aria-label": "Schedules" },
        el("thead", {}, el("tr", {}, ["Schedule", "When", "Target", "Next fire", "Last outcome", "Actions"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, body))
      : el("p", { class: "muted" }, "No schedule yet: declare one in the project, or POST /api/schedules."));
  } catch (err) {
    clear(box).append(el("p", { class: "error-text" }, `Schedules could not be read: ${err.message}`));
  }
  box.removeAttribute("aria-busy");
}

function scheduleRow(s) {
  const next = nextFire(s, nowUs());
  const last = lastOutcome(s);
  const nextCell = next.kind === "scheduled" ? timeEl(next.at, "us") : el("span", { class: next.kind === "due" ? "" : "muted" }, next.text);
  const lastCell = el("td", { class: "last-outcome", dataset: { outcome: last.kind } },
    el("span", { class: `outcome outcome-${last.kind}` }, last.text),
    s.last_fire_at ? [" · ", timeEl(s.last_fire_at, "us")] : null,
    last.thread ? [" · ", el("a", { href: `/threads/${last.thread}` }, "thread")] : null,
    last.error ? el("div", { class: "small error-text" }, last.error) : null);
  const toggle = actionButton(s.enabled ? "Disable" : "Enable", { "aria-label": `${s.enabled ? "Disable" : "Enable"} ${s.id}` },
    () => api(`/api/schedules/${encodeURIComponent(s.id)}`, { method: "PATCH", body: { enabled: !s.enabled } }),
    loadSchedules);
  const fire = actionButton("Fire now", { class: "primary", "aria-label": `Fire ${s.id} now` }, async () => {
    const { fire: done } = await api(`/api/schedules/${encodeURIComponent(s.id)}/fire`, { method: "POST" });
    toast(`${s.id}: ${done.status}${done.error ? ` (${done.error})` : ""}`, done.status === "failed" ? "error" : "info");
  }, loadSchedules);
  return el("tr", { dataset: { schedule: s.id, enabled: String(s.enabled) } },
    el("th", { scope: "row" }, el("code", {}, s.id),
      s.enabled ? null : el("span", { class: "badge" }, "disabled"),
      el("div", { class: "small muted" }, s.message)),
    el("td", {}, whenText(s)),
    el("td", {}, targetText(s)),
    el("td", { class: "next-fire", dataset: { next: next.kind } }, nextCell),
    lastCell,
    el("td", { class: "actions" }, toggle, " ", fire));
}

// -- triggers ---------------------------------------------------------------------------

async function loadTriggers() {
  const box = document.getElementById("triggers");
  try {
    const { triggers } = await api("/api/triggers");
    clear(box).append(triggers.length
      ? el("ul", { class: "auto-list" }, triggers.map((t) => triggerItem(t)))
      : el("p", { class: "muted" }, "No trigger yet: POST /api/triggers makes one (its secret is shown once)."));
  } catch (err) {
    clear(box).append(el("p", { class: "error-text" }, `Triggers could not be read: ${err.message}`));
  }
  box.removeAttribute("aria-busy");
}

function triggerItem(t) {
  const url = triggerUrl(location.origin, t);
  const copy = el("button", { type: "button", class: "ghost", "aria-label": `Copy the URL of ${t.id}` }, "Copy URL");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(url);
      toast("URL copied");
    } catch {
      toast("Copying is not allowed here: select the URL instead", "error");
    }
  });
  const toggle = actionButton(t.enabled ? "Disable" : "Enable", { "aria-label": `${t.enabled ? "Disable" : "Enable"} ${t.id}` },
    () => api(`/api/triggers/${encodeURIComponent(t.id)}`, { method: "PATCH", body: { enabled: !t.enabled } }),
    loadTriggers);
  return el("li", { class: "auto-item", dataset: { trigger: t.id, enabled: String(t.enabled) } },
    el("div", { class: "auto-head" }, el("code", {}, t.id),
      t.enabled ? null : el("span", { class: "badge" }, "disabled"),
      el("span", { class: "muted small" }, ` ${targetText(t)} · ${t.fire_count} call${t.fire_count === 1 ? "" : "s"}`),
      t.last_fire_at ? el("span", { class: "muted small" }, " · last ", timeEl(t.last_fire_at, "us")) : null,
      el("span", { class: "auto-actions" }, copy, " ", toggle)),
    el("label", { class: "small muted", for: `trigger-url-${t.id}` }, "URL to call (POST)"),
    el("input", { id: `trigger-url-${t.id}`, class: "trigger-url", type: "text", readonly: true, value: url }),
    el("details", {}, el("summary", { class: "small" }, "Example call"), el("pre", { class: "wrap" }, triggerCurl(location.origin, t))));
}

// -- webhooks ---------------------------------------------------------------------------

async function loadWebhooks() {
  const box = document.getElementById("webhooks");
  try {
    const { webhooks } = await api("/api/webhooks");
    const items = await Promise.all(webhooks.map(async (w) => {
      const { deliveries } = await api(`/api/webhooks/${encodeURIComponent(w.id)}/deliveries`, { query: { limit: 1000 } });
      return webhookItem(w, deliveries);
    }));
    clear(box).append(webhooks.length
      ? el("ul", { class: "auto-list" }, items)
      : el("p", { class: "muted" }, "No subscription yet: POST /api/webhooks subscribes a URL."));
  } catch (err) {
    clear(box).append(el("p", { class: "error-text" }, `Webhooks could not be read: ${err.message}`));
  }
  box.removeAttribute("aria-busy");
}

function webhookItem(w, deliveries) {
  const counts = countByState(deliveries);
  const recent = recentFirst(deliveries, 10);
  const toggle = actionButton(w.enabled ? "Disable" : "Enable", { "aria-label": `${w.enabled ? "Disable" : "Enable"} ${w.url}` },
    () => api(`/api/webhooks/${encodeURIComponent(w.id)}`, { method: "PATCH", body: { enabled: !w.enabled } }),
    loadWebhooks);
  return el("li", { class: "auto-item", dataset: { webhook: w.id, enabled: String(w.enabled) } },
    el("div", { class: "auto-head" }, el("code", {}, w.url),
      w.enabled ? null : el("span", { class: "badge" }, "disabled"),
      el("span", { class: "auto-actions" }, toggle)),
    el("div", { class: "small muted" }, eventTypesText(w.event_types), w.description ? ` · ${w.description}` : ""),
    el("div", { class: "small delivery-counts" },
      `${counts.delivered} delivered · ${counts.pending} pending · `,
      el("span", { class: counts.dead ? "error-text" : "" }, `${counts.dead} dead`)),
    recent.length
      ? el("details", { class: "recent-deliveries" }, el("summary", { class: "small" }, "Recent deliveries"),
        deliveryTable(recent, false))
      : null);
}

function deliveryTable(deliveries, withRedeliver) {
  return el("table", { class: "auto-table deliveries", "aria-label": withRedeliver ? "Dead letters" : "Recent deliveries" },
    el("thead", {}, el("tr", {}, ["Event", "Type", "State", "Last attempt", "Created", withRedeliver ? "Action" : null]
      .filter((h) => h !== null).map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, deliveries.map((d) => el("tr", { dataset: { event: d.event_id, state: d.state } },
      el("td", {}, el("code", { class: "small" }, d.event_id)),
      el("td", {}, d.event_type),
      el("td", {}, el("span", { class: `outcome outcome-${d.state === "dead" ? "fail" : d.state === "delivered" ? "ok" : "warn"}` }, d.state)),
      el("td", { class: "small" }, attemptText(d)),
      el("td", {}, timeEl(d.created_at, "us")),
      withRedeliver && canRedeliver(d)
        ? el("td", {}, actionButton("Re-deliver", { class: "primary", "aria-label": `Re-deliver ${d.event_id}` }, async () => {
          await api(`/api/webhooks/${encodeURIComponent(d.subscription_id)}/deliveries/${encodeURIComponent(d.event_id)}/redeliver`, { method: "POST" });
          toast(`${d.event_id} is pending again`);
        }, () => Promise.all([loadDead(), loadWebhooks()])))
        : null))));
}

async function loadDead() {
  const box = document.getElementById("dead-letters");
  try {
    const { deliveries } = await api("/api/webhook-deliveries", { query: { state: "dead", limit: 1000 } });
    clear(box).append(deliveries.length
      ? deliveryTable(recentFirst(deliveries, 1000), true)
      : el("p", { class: "muted" }, "No dead letter."));
  } catch (err) {
    clear(box).append(el("p", { class: "error-text" }, `Dead letters could not be read: ${err.message}`));
  }
  box.removeAttribute("aria-busy");
}

if (isAdmin) {
  for (const button of document.querySelectorAll("[data-reload]")) {
    const loaders = { schedules: loadSchedules, triggers: loadTriggers, webhooks: () => Promise.all([loadWebhooks(), loadDead()]) };
    button.addEventListener("click", () => loaders[button.dataset.reload]());
  }
  loadSchedules();
  loadTriggers();
  loadWebhooks();
  loadDead();
}
