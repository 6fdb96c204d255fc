// @ts-check
/**
 * The log viewer (#/job/<id>/log/<counter>, #/http/<id>/log/<counter>): a Job's log
 * followed live with server-sent events (/svc/api/job_exec/log/stream); when that is
 * not possible, and for a JobHttp, the log is fetched again every 5 seconds while its
 * status is `started`. A run asked for but not begun yet is waited for a minute.
 * Output is shown as text only; the service's own lines are marked.
 */

import { explain } from "../actions.js";
import { h } from "../dom.js";
import { refresh } from "../live.js";
import { api } from "../session.js";
import { badge } from "../widgets.js";

/** @typedef {import("../state.js").Kind} Kind */

const LOG_POLL_MS = 5000;
const WAIT_FOR_RUN_MS = 60000;
const LINE_TIME = /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (.*)$/;

/** @param {string} text base64 */
function base64Bytes(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/**
 * One line of a log: its time apart, the service's lines (===, $, ---) marked, a failed
 * or cancelled end marked as bad.
 * @param {string} line
 */
function lineNode(line) {
  const frag = document.createDocumentFragment();
  const m = LINE_TIME.exec(line);
  const text = m ? m[2] : line;
  if (m) frag.appendChild(h("span", { class: "t" }, m[1] + " "));
  const bad = /finished: fail|cancel/i.test(text) && /^===/.test(text);
  const cls = /^(===|\$ |---)/.test(text) ? (bad ? "svc bad" : "svc") : null;
  frag.appendChild(cls ? h("span", { class: cls }, text) : document.createTextNode(text));
  frag.appendChild(document.createTextNode("\n"));
  return frag;
}

/**
 * @param {MessageEvent} ev
 * @returns {any}
 */
function eventData(ev) {
  return JSON.parse(ev.data);
}

export class LogViewer {
  /**
   * @param {Kind} kind
   * @param {string} id
   * @param {number} counter the run's
   * @param {boolean} waiting the run has not begun yet
   */
  constructor(kind, id, counter, waiting) {
    this.kind = kind;
    this.id = id;
    this.counter = counter;
    this.waiting = waiting;
    this.pre = h("pre", { class: "log", id: "log", tabindex: "0", "aria-label": "Log content", "aria-live": "off" });
    this.statusBox = h("span", { id: "viewer-status" });
    this.mode = h("span", { class: "viewer-mode", id: "viewer-mode" });
    this.jump = h("button", { type: "button", class: "small", hidden: true }, "Jump to the end");
    this.download = h("a", { href: "#", id: "log-download", download: id + "." + counter + ".log" }, "Download");
    this.el = h("section", { class: "card viewer", "aria-labelledby": "viewer-title" },
      h("div", { class: "viewer-head" },
        h("h2", { id: "viewer-title" }, "Log #" + counter),
        this.statusBox, this.mode, h("span", { class: "viewer-mode" }, "times in UTC"), h("span", { class: "spacer" }),
        this.jump, this.download),
      this.pre);
    /** @type {Uint8Array[]} the log's bytes as received, for the download */
    this.chunks = [];
    this.received = 0;
    this.decoder = new TextDecoder("utf-8");
    /** The last line, until its end comes. */
    this.partial = "";
    this.partialNode = document.createTextNode("");
    this.pre.appendChild(this.partialNode);
    this.follow = true;
    this.closed = false;
    /** @type {EventSource | null} */
    this.source = null;
    /** @type {number | undefined} */
    this.timer = undefined;
    /** @type {string | null} */
    this.blobUrl = null;
    this.waitUntil = Date.now() + WAIT_FOR_RUN_MS;
    this.listen();
    this.setStatus("started", waiting ? "waiting for the run to start…" : "loading…");
    if (waiting && kind === "job") this.poll();
    else this.stream();
  }

  /** The viewer's own controls: follow the end unless scrolled up, and Download. */
  listen() {
    this.jump.addEventListener("click", () => {
      this.follow = true;
      this.jump.hidden = true;
      this.scroll();
    });
    this.download.addEventListener("click", () => this.prepareDownload());
    this.pre.addEventListener("scroll", () => {
      const atBottom = this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - 8;
      this.follow = atBottom;
      this.jump.hidden = atBottom;
    });
  }

  scroll() {
    if (this.follow) this.pre.scrollTop = this.pre.scrollHeight;
  }

  /**
   * @param {string} status the log's
   * @param {string} [text] how it is followed
   */
  setStatus(status, text) {
    this.statusBox.replaceChildren(badge(status === "fail" ? "failed" : status));
    if (text !== undefined) this.mode.textContent = text;
  }

  /** @param {string} text */
  addText(text) {
    const lines = (this.partial + text).split("\n");
    this.partial = lines.pop() || "";
    const frag = document.createDocumentFragment();
    lines.forEach((line) => frag.appendChild(lineNode(line)));
    this.pre.insertBefore(frag, this.partialNode);
    this.partialNode.nodeValue = this.partial;
  }

  /**
   * @param {Uint8Array} bytes
   * @param {boolean} final the log's last
   */
  addBytes(bytes, final) {
    this.chunks.push(bytes);
    this.received += bytes.length;
    this.addText(this.decoder.decode(bytes, { stream: !final }));
    this.scroll();
  }

  reset() {
    this.chunks = [];
    this.received = 0;
    this.decoder = new TextDecoder("utf-8");
    this.partial = "";
    this.pre.replaceChildren(this.partialNode);
    this.partialNode.nodeValue = "";
  }

  /** @param {string} status the log's final one */
  finish(status) {
    this.addText(this.decoder.decode());
    if (this.partial) this.addText("\n");
    this.setStatus(status, "");
    this.scroll();
    refresh();
  }

  prepareDownload() {
    if (this.blobUrl) URL.revokeObjectURL(this.blobUrl);
    this.blobUrl = URL.createObjectURL(new Blob(this.chunks, { type: "text/plain" }));
    this.download.href = this.blobUrl;
  }

  /** Live: server-sent events. Kind "job" only. */
  stream() {
    if (this.closed) return;
    if (typeof EventSource === "undefined" || this.kind !== "job") { this.poll(); return; }
    let opened = false;
    const source = new EventSource("/svc/api/job_exec/log/stream?id=" + encodeURIComponent(this.id) +
      "&counter=" + this.counter);
    this.source = source;
    source.addEventListener("meta", () => {
      opened = true;
      this.reset();
      this.setStatus("started", "live");
    });
    source.addEventListener("chunk", (ev) => {
      const data = eventData(ev);
      if (data.offset === this.received) this.addBytes(base64Bytes(data.content), false);
    });
    source.addEventListener("end", (ev) => {
      source.close();
      this.finish(eventData(ev).status);
    });
    source.addEventListener("gone", () => {
      source.close();
      this.setStatus("never", "the log was removed");
    });
    source.addEventListener("timeout", () => {
      source.close();
      this.poll();
    });
    source.onerror = () => {
      // Before the first event (404, no server-sent events on the way): poll instead.
      // After it the browser reconnects by itself and the stream starts over.
      if (!opened || source.readyState === EventSource.CLOSED) {
        source.close();
        if (!this.closed) this.poll();
      }
    };
  }

  /** Fallback and JobHttp logs: the log endpoint, again every 5 s while started. */
  async poll() {
    if (this.closed) return;
    const url = (this.kind === "job" ? "/svc/api/job_exec/log" : "/svc/api/job_http/log") +
      "?id=" + encodeURIComponent(this.id) + "&counter=" + this.counter;
    const result = await api("GET", url);
    if (this.closed) return;
    if (result.status === 404 && this.waiting && Date.now() < this.waitUntil) {
      this.mode.textContent = "waiting for the run to start…";
      this.timer = setTimeout(() => this.poll(), 700);
      return;
    }
    if (!result.ok) {
      this.setStatus("never", explain(result));
      return;
    }
    const log = result.data;
    this.reset();
    this.addBytes(base64Bytes(log.content || ""), log.status !== "started");
    if (log.status !== "started") {
      this.finish(log.status);
    } else if (this.waiting && this.kind === "job") {
      this.waiting = false;
      this.stream();
    } else {
      this.setStatus("started", "refreshed every 5 seconds");
      this.timer = setTimeout(() => this.poll(), LOG_POLL_MS);
    }
  }

  close() {
    this.closed = true;
    if (this.source) this.source.close();
    clearTimeout(this.timer);
    if (this.blobUrl) URL.revokeObjectURL(this.blobUrl);
  }
}
