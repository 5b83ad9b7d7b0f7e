// A WebSocket to this server that reconnects (spec 09 §9.11 rule 5): exponential backoff
// from 0.5 s, doubling, capped at 8 s here (a page wants to catch up soon after a restart),
// ±25 % jitter; no reconnect after close 1000 (thread deleted) or 4003 (access revoked).
// `url()` is asked anew for each attempt, so a thread stream resumes with ?since=<last seq>.

const FINAL = new Set([1000, 4003]);

export class LiveSocket {
  constructor({ url, onFrame, onState, onOpen, onRefused }) {
    this.url = url;
    this.onFrame = onFrame;
    this.onState = onState || (() => {});
    this.onOpen = onOpen || (() => {});
    // a browser cannot see why a handshake was refused (401, 403, 404 all read as 1006):
    // the page asks the API, which can say, before the next attempt
    this.onRefused = onRefused || (() => {});
    this.delay = 500;
    this.ws = null;
    this.stopped = false;
    this.timer = null;
    this.watchdog = null;
  }

  start() {
    this.stopped = false;
    this.connect();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.watchdog);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.onclose = null;
      ws.close(1000);
    }
  }

  connect() {
    if (this.stopped) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}${this.url()}`);
    this.ws = ws;
    this.onState("connecting");
    let openedAt = 0;
    ws.onopen = () => {
      openedAt = Date.now();
      this.onState("live");
      this.onOpen();
      this.arm();
    };
    ws.onmessage = (event) => {
      this.arm();
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return; // "pong" and the like
      }
      this.onFrame(frame);
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      clearTimeout(this.watchdog);
      if (this.stopped) return;
      if (FINAL.has(event.code)) {
        this.onState(event.code === 1000 ? "closed" : "revoked", event);
        return;
      }
      if (openedAt && Date.now() - openedAt > 10000) this.delay = 500;
      if (!openedAt) this.onRefused();
      // a server going away (1001) is reconnected to at once; anything else waits
      const wait = event.code === 1001 ? 100 : this.delay * (0.75 + Math.random() * 0.5);
      this.delay = Math.min(this.delay * 2, 8000);
      this.onState("reconnecting", event);
      this.timer = setTimeout(() => this.connect(), wait);
    };
  }

  // no frame for 45 s (heartbeats come every 15 s): the socket is dead, reconnect
  arm() {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      if (this.ws) this.ws.close(4000);
    }, 45000);
  }
}
