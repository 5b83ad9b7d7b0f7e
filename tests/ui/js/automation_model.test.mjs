// Unit tests of automation_model.js with Node's own test runner (node --test): the
// automation page's logic without a browser (spec 08 §8.15). Run by
// tests/ui/test_ui_units.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

// imported from its text, as timeline_model.test.mjs does (an ES module in a .js file)
const source = new URL("../../../src/threadloom/server/ui/static/js/automation_model.js", import.meta.url);
const m = await import(`data:text/javascript,${encodeURIComponent(await readFile(source, "utf8"))}`);

const S = 1_000_000;
const schedule = (extra = {}) => ({
  id: "daily", cron: null, timezone: "UTC", interval_s: null, thread_id: null, agent: "chat",
  enabled: true, next_fire_at: 100 * S, last_status: null, last_thread_id: null,
  last_error: null, last_fire_at: null, ...extra,
});

test("C08-262: a schedule's timing reads as its interval or its cron with the time zone", () => {
  assert.equal(m.whenText(schedule({ interval_s: 600 })), "every 10 min");
  assert.equal(m.whenText(schedule({ interval_s: 60 })), "every min");
  assert.equal(m.whenText(schedule({ interval_s: 7200 })), "every 2 h");
  assert.equal(m.whenText(schedule({ interval_s: 86400 })), "every day");
  assert.equal(m.whenText(schedule({ interval_s: 90 })), "every 90 s");
  assert.equal(m.whenText(schedule({ cron: "0 9 * * 1-5", timezone: "Europe/Paris" })),
    "cron 0 9 * * 1-5 (Europe/Paris)");
  assert.equal(m.targetText({ thread_id: "t-1", agent: null }), "thread t-1");
  assert.equal(m.targetText({ thread_id: null, agent: "chat" }), "new thread of chat");
});

test("C08-262: the next fire is a time, due now once passed, and none while disabled", () => {
  assert.deepEqual(m.nextFire(schedule(), 50 * S), { kind: "scheduled", text: "", at: 100 * S });
  assert.equal(m.nextFire(schedule(), 100 * S).kind, "due");
  assert.equal(m.nextFire(schedule({ enabled: false }), 50 * S).kind, "disabled");
  assert.equal(m.nextFire(schedule({ next_fire_at: null }), 50 * S).kind, "none");
});

test("C08-262: the last outcome: never fired, fired with its thread, failed with its error", () => {
  assert.equal(m.lastOutcome(schedule()).kind, "none");
  assert.equal(m.lastOutcome(schedule()).text, "never fired");
  const fired = m.lastOutcome(schedule({ last_status: "fired", last_thread_id: "t-9" }));
  assert.deepEqual([fired.kind, fired.text, fired.thread, fired.error], ["ok", "fired", "t-9", null]);
  const failed = m.lastOutcome(schedule({ last_status: "failed", last_error: "agent gone" }));
  assert.deepEqual([failed.kind, failed.error], ["fail", "agent gone"]);
  assert.equal(m.lastOutcome(schedule({ last_status: "skipped" })).kind, "warn");
  assert.equal(m.lastOutcome(schedule({ last_status: "missed", last_error: "x" })).error, null);
});

test("C08-264: a trigger's URL is absolute on this origin, and its example call names it", () => {
  const t = { id: "payments", url: "/api/triggers/payments/fire" };
  assert.equal(m.triggerUrl("http://127.0.0.1:8000/", t), "http://127.0.0.1:8000/api/triggers/payments/fire");
  assert.equal(m.triggerUrl("https://x.example", { id: "a b" }), "https://x.example/api/triggers/a%20b/fire");
  assert.equal(m.triggerUrl("https://x.example", { id: "a", url: "https://elsewhere/f" }), "https://elsewhere/f");
  const curl = m.triggerCurl("https://x.example", t);
  assert.match(curl, /^curl -X POST 'https:\/\/x\.example\/api\/triggers\/payments\/fire'/);
  assert.match(curl, /Idempotency-Key/);
  assert.match(curl, /Authorization: Bearer <the trigger secret>/);
});

const delivery = (id, state, at, extra = {}) => ({
  event_id: id, subscription_id: "w", event_type: "run.settled", state, created_at: at,
  attempts: 1, last_status: state === "delivered" ? 200 : 503, last_error: null, ...extra,
});

test("C08-266: deliveries are counted by state and listed newest first, at most a limit", () => {
  const list = [delivery("a", "delivered", 1), delivery("b", "dead", 3), delivery("c", "pending", 2),
    delivery("d", "delivered", 4)];
  assert.deepEqual(m.countByState(list), { pending: 1, delivered: 2, dead: 1 });
  assert.deepEqual(m.countByState([]), { pending: 0, delivered: 0, dead: 0 });
  assert.deepEqual(m.recentFirst(list).map((d) => d.event_id), ["d", "b", "c", "a"]);
  assert.deepEqual(m.recentFirst(list, 2).map((d) => d.event_id), ["d", "b"]);
  assert.deepEqual(list.map((d) => d.event_id), ["a", "b", "c", "d"]); // not sorted in place
  assert.equal(m.eventTypesText([]), "every event");
  assert.equal(m.eventTypesText(["run.settled", "thread.created"]), "run.settled, thread.created");
});

test("C08-266: an attempt reads as its answer or its error; only a dead one is re-delivered", () => {
  assert.equal(m.attemptText(delivery("a", "delivered", 1)), "200 after 1 attempt");
  assert.equal(m.attemptText(delivery("a", "dead", 1, { attempts: 3 })), "503 (3 attempts)");
  assert.equal(m.attemptText(delivery("a", "pending", 1, { attempts: 2, last_status: null,
    last_error: "timed out after 10 s" })), "timed out after 10 s (2 attempts)");
  assert.equal(m.attemptText(delivery("a", "pending", 1, { attempts: 0, last_status: null })), "not tried yet");
  assert.equal(m.canRedeliver(delivery("a", "dead", 1)), true);
  assert.equal(m.canRedeliver(delivery("a", "pending", 1)), false);
  assert.equal(m.canRedeliver(delivery("a", "delivered", 1)), false);
});
