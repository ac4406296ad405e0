// streamfold serve: shows one served response live, from its SSE route (streamfold's JSON events).
// Plain JS, no build step. EventSource reconnects by itself and sends Last-Event-ID, so the server
// resumes exactly after the last event this page received.
"use strict";

const $ = (id) => document.getElementById(id);
const main = $("response");
const badge = $("connection");
const segments = new Map(); // segment id -> view
let lastId = null;
let reconnects = 0;
let settle;
window.streamfoldDone = new Promise((resolve) => { settle = resolve; });
const waiting = []; // [id, resolve]: window.streamfoldSeen(n) resolves once event n arrived
window.streamfoldSeen = (n) => new Promise((resolve) => {
  if (Number(lastId) >= n) resolve(Number(lastId)); else waiting.push([n, resolve]);
});

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setState(state, label) {
  document.body.dataset.state = state;
  badge.className = "badge " + state;
  badge.textContent = label || state;
}

function log(text) {
  $("log").append(el("div", "", text));
}

// -- a tiny highlighter: whole lines are highlighted once, the line still streaming is plain text ----
const KEYWORDS = new Set(("and as assert async await break case catch class const continue def default del"
  + " do elif else enum except export extends false False finally fn for from func function if impl import"
  + " in interface is lambda let match mut new nil None not null or package pass pub raise return self"
  + " static struct super switch this throw true True try type typeof use var void while with yield").split(" "));
const HASH_COMMENTS = new Set(["py", "sh", "bash", "rb", "yaml", "yml", "toml", "r", "pl", "conf", "cfg"]);

function highlightLine(line, ext, patch) {
  const frag = document.createDocumentFragment();
  if (patch) {
    const cls = line.startsWith("@@") ? "tk-hunk" : line.startsWith("+") ? "tk-add"
      : line.startsWith("-") ? "tk-del" : "";
    frag.append(cls ? el("span", cls, line) : document.createTextNode(line));
    return frag;
  }
  const comment = HASH_COMMENTS.has(ext) ? "#.*" : "\\/\\/.*|\\/\\*.*?(?:\\*\\/|$)";
  const re = new RegExp("(" + comment + ")|(\"(?:[^\"\\\\]|\\\\.)*\"?|'(?:[^'\\\\]|\\\\.)*'?|`[^`]*`?)"
    + "|\\b(\\d[\\d_]*(?:\\.\\d+)?)\\b|([A-Za-z_]\\w*)", "g");
  let at = 0;
  for (const m of line.matchAll(re)) {
    if (m.index > at) frag.append(document.createTextNode(line.slice(at, m.index)));
    let cls = m[1] ? "tk-c" : m[2] ? "tk-s" : m[3] ? "tk-n" : "";
    if (m[4]) cls = KEYWORDS.has(m[4]) ? "tk-k" : line[m.index + m[4].length] === "(" ? "tk-f" : "";
    frag.append(cls ? el("span", cls, m[0]) : document.createTextNode(m[0]));
    at = m.index + m[0].length;
  }
  if (at < line.length) frag.append(document.createTextNode(line.slice(at)));
  return frag;
}

class CodeView {
  constructor(pre, patch) {
    this.pre = pre;
    this.patch = patch;
    this.ext = "";
    this.partial = "";
    this.tail = document.createTextNode("");
    pre.append(this.tail);
  }
  push(text) {
    const lines = text.split("\n");
    for (let i = 0; i < lines.length - 1; i++) {
      const line = this.partial + lines[i];
      this.partial = "";
      this.pre.insertBefore(highlightLine(line, this.ext, this.patch), this.tail);
      this.pre.insertBefore(document.createTextNode("\n"), this.tail);
    }
    this.partial += lines[lines.length - 1];
    this.tail.data = this.partial;
    this.pre.scrollTop = this.pre.scrollHeight;
  }
}

// -- segments ------------------------------------------------------------------------------------------
const LABELS = { text: "text", reasoning: "reasoning", tool_call: "tool call", write_file: "writing file",
  patch_file: "patching file", tool_result: "tool result" };

function startSegment(event) {
  const type = event.segment_type || "text";
  const meta = (event.payload && event.payload.metadata) || {};
  const view = { type, el: el("section", "segment streaming " + type), done: false, complete: [] };
  view.el.dataset.segmentId = event.segment_id;
  const title = el("div", "title", LABELS[type] || type);
  view.name = el("span", "name", meta.tool_name || "");
  title.append(view.name);
  view.info = el("span", "muted");
  title.append(view.info);
  view.el.append(title);
  if (type === "text" || type === "reasoning") {
    view.body = el("div", "body");
    view.text = document.createTextNode("");
    view.body.append(view.text);
  } else if (type === "write_file" || type === "patch_file") {
    view.body = el("pre", "code");
    view.code = new CodeView(view.body, type === "patch_file");
  } else {
    view.body = el("pre", "args");
    view.text = document.createTextNode("");
    view.body.append(view.text);
  }
  view.el.append(view.body);
  main.append(view.el);
  segments.set(event.segment_id, view);
  return view;
}

function setPath(view, path) {
  view.path = path;
  view.name.textContent = path;
  if (view.code) view.code.ext = (path.match(/\.([A-Za-z0-9]+)$/) || ["", ""])[1].toLowerCase();
}

function onSegment(event) {
  if (event.type === "SEGMENT_START") { startSegment(event); return; }
  const view = segments.get(event.segment_id) || startSegment({ segment_id: event.segment_id });
  const payload = event.payload || {};
  if (event.type === "SEGMENT_CONTENT") {
    if (view.code) view.code.push(payload.delta);
    else view.text.appendData(payload.delta);
  } else if (event.type === "SEGMENT_ARGUMENT") {
    const key = payload.path && payload.path[payload.path.length - 1];
    if (view.code && payload.path.length === 1 && typeof payload.value === "string" && !view.path) {
      if (key === "path" || key === "file_path" || key === "filename") setPath(view, payload.value);
    }
    if ("value" in payload && payload.path.length === 1) {
      view.complete.push(key);
      view.info.textContent = "complete: " + view.complete.join(", ");
    }
  } else if (event.type === "SEGMENT_END") {
    const meta = payload.metadata || {};
    view.el.classList.remove("streaming");
    if (meta.path) setPath(view, meta.path);
    if (view.code && view.code.partial) view.code.push("\n");
    if (meta.error) view.el.append(el("div", "error", meta.error.kind + ": " + meta.error.message));
  }
}

function onInvocation(event) {
  const view = segments.get(event.id);
  const line = event.error
    ? el("div", "invocation error", "invocation " + event.name + " failed: " + event.error.message)
    : el("div", "invocation", "\u2713 invocation folded: " + event.name + "("
      + Object.keys(event.arguments || {}).join(", ") + ")");
  (view ? view.el : main).append(line);
}

function onApprovalRequest(event) {
  const view = segments.get(event.call_id);
  const box = el("div", "approval", "approve " + event.name + "("
    + JSON.stringify(event.arguments || {}) + ")? ");
  box.dataset.call = event.call_id;
  const decide = async (approved) => {
    for (const button of box.querySelectorAll("button")) button.disabled = true;
    const response = await fetch("approvals/" + encodeURIComponent(event.call_id), {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ approved }),
    });
    const answer = await response.json();
    box.dataset.decided = response.ok ? (approved ? "approved" : "denied") : "refused";
    box.append(" " + (response.ok ? box.dataset.decided : answer.message));
  };
  const approve = el("button", "approve", "approve");
  const deny = el("button", "deny", "deny");
  approve.addEventListener("click", () => decide(true));
  deny.addEventListener("click", () => decide(false));
  box.append(approve, deny);
  (view ? view.el : main).append(box);
}

function onOutput(event) {
  for (const box of document.querySelectorAll(".approval")) {
    if (box.dataset.call === event.call_id) {
      for (const button of box.querySelectorAll("button")) button.remove();
    }
  }
  const view = segments.get(event.call_id);
  const text = typeof event.output === "string" ? event.output : JSON.stringify(event.output);
  (view ? view.el : main).append(el("pre", "output", event.status + ": " + text));
}

function onEnd(event) {
  const footer = $("finish");
  footer.hidden = false;
  const usage = event.usage;
  footer.textContent = "finish: " + (event.finish_reason || "unknown")
    + (usage ? "  \u00b7  tokens: " + usage.prompt_tokens + " in, " + usage.completion_tokens + " out, "
      + usage.total_tokens + " total" : "");
}

function handle(event) {
  switch (event.type) {
    case "TOOL_INVOCATION": onInvocation(event); break;
    case "TOOL_OUTPUT": onOutput(event); break;
    case "TOOL_APPROVAL_REQUEST": onApprovalRequest(event); break;
    case "RESPONSE_END": onEnd(event); break;
    default: if (event.type && event.type.startsWith("SEGMENT_")) onSegment(event);
  }
}

// -- the connection ------------------------------------------------------------------------------------
function finish(state, label) {
  setState(state, label);
  settle(state);
}

function watch(responseId) {
  const source = new EventSource("responses/" + encodeURIComponent(responseId) + "/events");
  source.onopen = () => {
    if (reconnects > 0) log("reconnected; resumed after event " + lastId);
    setState("live", reconnects > 0 ? "live (reconnected " + reconnects + "x)" : "live");
  };
  source.onmessage = (message) => {
    lastId = message.lastEventId;
    handle(JSON.parse(message.data));
    for (let i = waiting.length - 1; i >= 0; i--) {
      if (Number(lastId) >= waiting[i][0]) { waiting[i][1](Number(lastId)); waiting.splice(i, 1); }
    }
  };
  source.addEventListener("end", () => {
    source.close();
    finish("done", reconnects > 0 ? "done (reconnected " + reconnects + "x)" : "done");
  });
  source.addEventListener("error", (message) => {
    if (message.data !== undefined) { // the server's `event: error`
      const error = JSON.parse(message.data);
      main.append(el("div", "segment error", error.error + ": " + error.message));
      if (message.lastEventId && message.lastEventId !== lastId) { // a terminal entry: the response failed
        source.close();
        finish("failed");
      }
      return;
    }
    if (source.readyState === EventSource.CONNECTING) {
      reconnects += 1;
      log("connection lost after event " + lastId + "; reconnecting");
      setState("reconnecting", "reconnecting\u2026");
    } else if (document.body.dataset.state !== "done") {
      finish("failed", "connection failed");
    }
  });
}

async function begin(body) {
  const response = await fetch("responses", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) { main.append(el("div", "segment error", answer.message)); finish("failed"); return; }
  history.replaceState(null, "", "?response=" + encodeURIComponent(answer.response_id));
  watch(answer.response_id);
}

async function init() {
  const answer = await fetch("config");
  const config = await answer.json();
  if (!answer.ok) { main.append(el("div", "segment error", config.message)); finish("failed", "refused"); return; }
  $("source").textContent = config.label;
  const wanted = new URLSearchParams(location.search).get("response");
  if (wanted) { watch(wanted); return; }
  if (config.mode === "viewer") { finish("failed", "no ?response= in the address"); return; }
  if (config.mode !== "upstream") { begin({}); return; }
  setState("idle", "waiting for a prompt");
  const form = $("prompt");
  form.hidden = false;
  form.addEventListener("submit", (submit) => {
    submit.preventDefault();
    form.hidden = true;
    begin({ prompt: $("prompt-text").value });
  });
}

init();
