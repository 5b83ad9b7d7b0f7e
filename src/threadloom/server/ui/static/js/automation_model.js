// The automation page's logic without the DOM (spec 08 §8.15, C08-260…): how a schedule's
// timing, its next fire and its last outcome read, a trigger's URL to call, and a
// subscription's recent deliveries summed up. Imports nothing, so Node's test runner loads
// it as the browser does (tests/ui/js/automation_model.test.mjs). Times are µs, as the API
// answers them.

// "every 10 min", "every 2 h", "every 90 s", "every day"
export function intervalText(seconds) {
  const units = [
    [86400, "day", "days"],
    [3600, "h", "h"],
    [60, "min", "min"],
  ];
  for (const [size, one, many] of units) {
    if (seconds % size === 0) {
      const n = seconds / size;
      return n === 1 ? `every ${one}` : `every ${n} ${many}`;
    }
  }
  return `every ${seconds} s`;
}

// what makes a schedule fire: its cron expression with its time zone, or its interval
export function whenText(schedule) {
  if (schedule.cron) return `cron ${schedule.cron} (${schedule.timezone || "UTC"})`;
  if (schedule.interval_s) return intervalText(schedule.interval_s);
  return "—";
}

// where a schedule's message goes: an existing thread, or a new thread of an agent
export function targetText(target) {
  if (target.thread_id) return `thread ${target.thread_id}`;
  if (target.agent) return `new thread of ${target.agent}`;
  return "—";
}

// the next fire: none while disabled (the scheduler does not fire it), "due now" when the
// time has passed (a node claims it at its next tick), else the time (µs)
export function nextFire(schedule, nowUs) {
  if (!schedule.enabled) return { kind: "disabled", text: "disabled", at: null };
  const at = schedule.next_fire_at;
  if (at === null || at === undefined) return { kind: "none", text: "none", at: null };
  if (at <= nowUs) return { kind: "due", text: "due now", at };
  return { kind: "scheduled", text: "", at };
}

const OUTCOMES = {
  fired: "ok",
  skipped: "warn",
  missed: "warn",
  failed: "fail",
};

// the last fire's outcome: its status with how it reads (ok, warn, fail), the thread it
// sent to and the error of a failed one; never fired: kind "none"
export function lastOutcome(schedule) {
  const status = schedule.last_status;
  if (!status) return { kind: "none", text: "never fired", status: null, thread: null, error: null };
  return {
    kind: OUTCOMES[status] || "warn",
    text: status,
    status,
    thread: schedule.last_thread_id || null,
    error: status === "failed" ? schedule.last_error || null : null,
  };
}

// the absolute URL a caller POSTs to: the API answers a path of this server
export function triggerUrl(origin, trigger) {
  const path = trigger.url || `/api/triggers/${encodeURIComponent(trigger.id)}/fire`;
  if (/^https?:\/\//.test(path)) return path;
  return origin.replace(/\/+$/, "") + (path.startsWith("/") ? path : `/${path}`);
}

// a curl command for the trigger (its secret is never known to the page: a placeholder)
export function triggerCurl(origin, trigger) {
  return (
    `curl -X POST '${triggerUrl(origin, trigger)}' \\\n` +
    "  -H 'Authorization: Bearer <the trigger secret>' \\\n" +
    "  -H 'Idempotency-Key: <a key of yours>' \\\n" +
    "  -H 'Content-Type: application/json' -d '{\"text\": \"hello\"}'"
  );
}

// a subscription's event types, "every event" when it names none
export function eventTypesText(types) {
  return types && types.length ? types.join(", ") : "every event";
}

// deliveries by state: {pending, delivered, dead}
export function countByState(deliveries) {
  const counts = { pending: 0, delivered: 0, dead: 0 };
  for (const d of deliveries) counts[d.state] = (counts[d.state] || 0) + 1;
  return counts;
}

// newest first (the API lists oldest first), at most `limit`
export function recentFirst(deliveries, limit = 20) {
  return [...deliveries]
    .sort((a, b) => b.created_at - a.created_at || (a.event_id < b.event_id ? 1 : -1))
    .slice(0, limit);
}

// one delivery's last attempt, in words: "200 after 1 attempt", "503 (3 attempts)",
// "timed out after 10 s (2 attempts)", "not tried yet"
export function attemptText(d) {
  const attempts = `${d.attempts} attempt${d.attempts === 1 ? "" : "s"}`;
  if (d.state === "delivered") return `${d.last_status ?? "2xx"} after ${attempts}`;
  if (!d.attempts) return "not tried yet";
  const why = d.last_error || (d.last_status !== null && d.last_status !== undefined ? String(d.last_status) : "failed");
  return `${why} (${attempts})`;
}

// whether the page may offer Re-deliver: only a dead delivery (the API answers 409 else)
export function canRedeliver(d) {
  return d.state === "dead";
}
