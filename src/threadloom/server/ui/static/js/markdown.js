// Markdown of the model's messages, rendered by the server (POST /api/markdown, spec 08
// §8.10.6: markdown-it-py with raw HTML off, then sanitized by nh3) and inserted here as
// the sanitized HTML it answers. A text is shown plain at once, then replaced by its
// rendering when the batch it joined comes back; renderings are kept by text, so a message
// drawn again (a status change, a page read again) is rendered at once without a request.
// A streaming message stays plain until it completes. Each code block gets a Copy button.
import { api, el } from "./api.js";

const BATCH = 200; // the most texts one request may carry (the route's limit)
const LONGEST = 64 * 1024; // the longest text it renders: a longer one stays plain
const BUDGET = 256 * 1024; // characters a request carries at most: at 3 bytes each in UTF-8, within the 1 MiB body
const KEEP = 2000; // renderings kept; the oldest go first

export class Markdown {
  constructor() {
    this.cache = new Map(); // text -> html
    this.waiting = new Map(); // text -> Set of elements to fill
    this.scheduled = false;
    this.failed = false; // the route refused once (an old server): stay plain
  }

  // fill `target` with `text` rendered: at once when known, else plain now and rendered later
  fill(target, text) {
    const html = this.cache.get(text);
    if (html !== undefined) {
      put(target, html);
      return;
    }
    target.textContent = text;
    if (this.failed || text.length > LONGEST) return;
    target.classList.add("md-waiting");
    if (!this.waiting.has(text)) this.waiting.set(text, new Set());
    this.waiting.get(text).add(target);
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  async flush() {
    this.scheduled = false;
    const texts = [...this.waiting.keys()];
    const targets = this.waiting;
    this.waiting = new Map();
    for (const part of batches(texts)) {
      let answer;
      try {
        answer = await api("/api/markdown", { method: "POST", body: { texts: part } });
      } catch (err) {
        if (err.status && err.status < 500) this.failed = true;
        part.forEach((t) => targets.get(t).forEach((n) => n.classList.remove("md-waiting")));
        continue;
      }
      part.forEach((text, j) => {
        this.remember(text, answer.html[j]);
        for (const target of targets.get(text)) {
          // a node drawn again meanwhile was replaced; one still holding the text is filled
          if (target.isConnected && target.textContent === text) put(target, answer.html[j]);
          target.classList.remove("md-waiting");
        }
      });
    }
  }

  remember(text, html) {
    this.cache.set(text, html);
    if (this.cache.size > KEEP) this.cache.delete(this.cache.keys().next().value);
  }
}

// the texts in requests of at most BATCH texts and about BUDGET characters
function batches(texts) {
  const out = [];
  let part = [];
  let size = 0;
  for (const text of texts) {
    if (part.length && (part.length === BATCH || size + text.length > BUDGET)) {
      out.push(part);
      part = [];
      size = 0;
    }
    part.push(text);
    size += text.length;
  }
  if (part.length) out.push(part);
  return out;
}

// the server's sanitized HTML into `target`, each code block with its Copy button
function put(target, html) {
  const template = document.createElement("template");
  template.innerHTML = html.trim(); // sanitized by the server (nh3); the page's CSP runs no inline script
  target.replaceChildren(template.content);
  target.classList.add("md");
  target.classList.remove("md-waiting");
  for (const pre of target.querySelectorAll("pre")) {
    const button = el("button", { type: "button", class: "copy", "aria-label": "Copy code" }, "Copy");
    button.addEventListener("click", () => copy(pre, button));
    const block = el("div", { class: "code-block" });
    pre.replaceWith(block);
    block.append(button, pre);
  }
}

async function copy(pre, button) {
  const text = pre.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    // no clipboard (an insecure origin): select the code so that Ctrl+C copies it
    const range = document.createRange();
    range.selectNodeContents(pre);
    const selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
}
