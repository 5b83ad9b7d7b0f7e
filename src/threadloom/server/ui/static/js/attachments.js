// Files attached to the next message of the composer: chosen with "Attach files…", dropped
// on the composer or pasted into it; shown as removable chips (a thumbnail for images) and
// sent as the upload items of POST …/messages (spec 08 §8.2.5: at most 20 files, each
// 1 byte to 20 MiB, base64).
import { el, clear, bytes } from "./api.js";

const MAX_FILES = 20;
const MAX_FILE_BYTES = 20 * 1024 * 1024;
const THUMBS = /^image\/(png|jpeg|gif|webp)$/;

function base64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error || new Error(`Could not read ${file.name}`));
    reader.readAsDataURL(file);
  });
}

export class Attachments {
  // `note(text, kind)` says what was refused; `enabled()` is false after a termination
  constructor({ form, textarea, button, input, list, note, enabled }) {
    this.items = []; // {file, url}
    this.list = list;
    this.textarea = textarea;
    this.note = note;
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      this.add([...input.files]);
      input.value = "";
    });
    form.addEventListener("dragover", (event) => {
      if (!enabled() || !event.dataTransfer || ![...event.dataTransfer.types].includes("Files")) return;
      event.preventDefault();
      form.dataset.drop = "true";
    });
    form.addEventListener("dragleave", () => { delete form.dataset.drop; });
    form.addEventListener("drop", (event) => {
      delete form.dataset.drop;
      if (!enabled() || !event.dataTransfer || !event.dataTransfer.files.length) return;
      event.preventDefault();
      this.add([...event.dataTransfer.files]);
    });
    textarea.addEventListener("paste", (event) => {
      const files = event.clipboardData ? [...event.clipboardData.files] : [];
      if (!files.length || !enabled()) return;
      event.preventDefault();
      this.add(files);
    });
  }

  get count() {
    return this.items.length;
  }

  add(files) {
    const refused = [];
    for (const file of files) {
      if (this.items.length >= MAX_FILES) refused.push(`${file.name} (at most ${MAX_FILES} files)`);
      else if (file.size === 0) refused.push(`${file.name} (empty)`);
      else if (file.size > MAX_FILE_BYTES) refused.push(`${file.name} (over 20 MiB)`);
      else this.items.push({ file, url: THUMBS.test(file.type) ? URL.createObjectURL(file) : null });
    }
    this.draw();
    this.note(refused.length ? `Not attached: ${refused.join(", ")}` : "", refused.length ? "error" : "");
  }

  draw() {
    clear(this.list);
    this.list.hidden = this.items.length === 0;
    this.items.forEach((item, i) => {
      const remove = el("button", { type: "button", class: "ghost small", "aria-label": `Remove ${item.file.name}` }, "×");
      remove.addEventListener("click", () => {
        if (item.url) URL.revokeObjectURL(item.url);
        this.items.splice(i, 1);
        this.draw();
        (this.list.querySelector("button") || this.textarea).focus();
      });
      this.list.append(el("li", { class: "composer-file", dataset: { name: item.file.name } },
        item.url ? el("img", { src: item.url, alt: "", class: "composer-thumb" }) : null,
        el("span", {}, item.file.name), el("span", { class: "muted small" }, ` ${bytes(item.file.size)}`), remove));
    });
  }

  // the upload items of the files attached now
  async payload() {
    return Promise.all(this.items.map(async ({ file }) => ({
      name: file.name,
      mimeType: file.type || "application/octet-stream",
      data: await base64(file),
    })));
  }

  // after a send: forget the files that went with it
  sent(count) {
    for (const item of this.items.slice(0, count)) if (item.url) URL.revokeObjectURL(item.url);
    this.items.splice(0, count);
    this.draw();
  }
}
