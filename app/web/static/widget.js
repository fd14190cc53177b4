/* GPU Tutor chat widget: <script src="https://tutor.example/widget.js" data-api="https://tutor.example" async></script>
 * No framework, no build step. Everything lives in a shadow root; theme it with CSS custom properties on #gpu-tutor
 * (--gt-accent, --gt-bg, --gt-fg, --gt-muted, --gt-radius, --gt-font). Text from the learner and the server is only
 * ever inserted with textContent; charts arrive as data: image URLs and are shown with <img>. */
(function () {
  "use strict";
  if (window.GPUTutor) return;

  var script = document.currentScript || document.querySelector("script[src*='widget.js']");
  var scriptOrigin = script && script.src ? new URL(script.src, location.href).origin : location.origin;
  var API = ((script && script.getAttribute("data-api")) || scriptOrigin).replace(/\/+$/, "");
  var KEY = "gpu-tutor:" + API;
  var PASSAGE_ID = /^p_[0-9a-f]{1,32}$/;
  var IMAGE_URL = /^data:image\/(svg\+xml|png);base64,[A-Za-z0-9+\/=]+$/;

  var CSS = [
    ":host{--gt-accent:#2f5fd0;--gt-bg:#ffffff;--gt-fg:#1b2230;--gt-muted:#5d6679;--gt-soft:#eef2fb;",
    "--gt-radius:14px;--gt-font:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;all:initial}",
    "*{box-sizing:border-box}",
    ".launcher{position:fixed;right:20px;bottom:20px;z-index:2147483000;border:0;border-radius:999px;",
    "padding:12px 18px;background:var(--gt-accent);color:#fff;font:600 15px var(--gt-font);cursor:pointer;",
    "box-shadow:0 6px 20px rgba(0,0,0,.2)}",
    ".launcher:focus-visible,button:focus-visible,textarea:focus-visible,summary:focus-visible,.log:focus-visible{",
    "outline:3px solid #ffb000;outline-offset:2px}",
    ".panel{position:fixed;right:20px;bottom:80px;z-index:2147483001;width:380px;max-width:calc(100vw - 24px);",
    "height:min(620px,calc(100vh - 110px));display:flex;flex-direction:column;background:var(--gt-bg);",
    "color:var(--gt-fg);font:14px/1.45 var(--gt-font);border-radius:var(--gt-radius);",
    "box-shadow:0 12px 40px rgba(0,0,0,.25);overflow:hidden}",
    ".panel[hidden]{display:none}",
    "header{display:flex;align-items:center;gap:8px;padding:10px 12px;background:var(--gt-accent);color:#fff}",
    "header h2{flex:1;margin:0;font:600 16px var(--gt-font)}",
    "header button{background:transparent;color:#fff;border:1px solid rgba(255,255,255,.6);border-radius:8px;",
    "padding:4px 8px;font:13px var(--gt-font);cursor:pointer;min-height:32px;min-width:32px}",
    ".log{flex:1;overflow-y:auto;padding:12px;display:flex;flex-direction:column;gap:10px}",
    ".msg{max-width:92%;padding:8px 11px;border-radius:12px;word-wrap:break-word;overflow-wrap:anywhere}",
    ".learner{align-self:flex-end;background:var(--gt-accent);color:#fff;white-space:pre-wrap}",
    ".tutor{align-self:flex-start;background:var(--gt-soft)}",
    ".tutor.error{background:#fde8e8;color:#8a1c1c}",
    ".tutor p{margin:0 0 6px}.tutor p:last-child{margin-bottom:0}.tutor ul{margin:4px 0 6px;padding-left:18px}",
    ".tutor code{background:rgba(0,0,0,.06);padding:0 3px;border-radius:4px}",
    ".ref{color:var(--gt-accent);font-size:11px;vertical-align:super;margin-left:1px}",
    "details.cite{margin-top:6px;border-left:3px solid var(--gt-accent);padding:2px 8px;background:var(--gt-bg);",
    "border-radius:6px}",
    "details.cite summary{cursor:pointer;color:var(--gt-muted);font-size:12px}",
    "details.cite blockquote{margin:4px 0;font-size:13px}.cite .q,.cite .note{margin:4px 0;font-size:12px;",
    "color:var(--gt-muted)}",
    "details.cite a.open-passage{font-size:12px;color:var(--gt-accent)}",
    ".buttons{display:flex;flex-wrap:wrap;gap:6px;margin-top:8px}",
    ".buttons button{border:1px solid var(--gt-accent);background:var(--gt-bg);color:var(--gt-accent);",
    "border-radius:8px;padding:6px 10px;font:13px var(--gt-font);cursor:pointer;text-align:left;min-height:34px}",
    ".buttons.choices{flex-direction:column}",
    "figure{margin:8px 0 0}figure img{width:100%;height:auto;background:#fff;border-radius:8px}",
    "figcaption{font-size:12px;color:var(--gt-muted)}",
    ".run{font-size:12px;color:var(--gt-muted)}.run progress{width:100%}",
    ".typing{display:flex;gap:4px;padding:0 16px 8px}.typing[hidden]{display:none}",
    ".typing span{width:8px;height:8px;border-radius:50%;background:var(--gt-muted);animation:gt 1s infinite}",
    ".typing span:nth-child(2){animation-delay:.15s}.typing span:nth-child(3){animation-delay:.3s}",
    "@keyframes gt{0%,80%,100%{opacity:.25}40%{opacity:1}}",
    "@media (prefers-reduced-motion:reduce){.typing span{animation:none}}",
    "form{display:flex;gap:8px;padding:10px;border-top:1px solid rgba(0,0,0,.08)}",
    "textarea{flex:1;resize:none;border:1px solid #c8cfdc;border-radius:10px;padding:8px;",
    "font:14px/1.4 var(--gt-font);color:var(--gt-fg);background:var(--gt-bg);max-height:120px}",
    "form button{border:0;border-radius:10px;padding:0 14px;background:var(--gt-accent);color:#fff;",
    "font:600 14px var(--gt-font);cursor:pointer;min-height:40px}",
    "form button:disabled{opacity:.5;cursor:default}",
    ".sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}",
    "@media (max-width:520px){.panel{inset:0;width:100%;max-width:none;height:100%;border-radius:0}",
    ".launcher{right:12px;bottom:12px}}"
  ].join("");

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function loadStore() {
    try { return JSON.parse(localStorage.getItem(KEY) || "{}") || {}; } catch (e) { return {}; }
  }
  function saveStore() {
    try { localStorage.setItem(KEY, JSON.stringify(state)); } catch (e) { /* private mode: memory only */ }
  }
  var state = loadStore();

  // ---- the shadow DOM ------------------------------------------------------------------------------------
  var host = el("div", { id: "gpu-tutor" });
  var root = host.attachShadow({ mode: "open" });
  root.appendChild(el("style", {}, CSS));
  var launcher = el("button", { class: "launcher", type: "button", "aria-expanded": "false",
    "aria-controls": "gt-panel" }, "Ask the tutor");
  var panel = el("section", { class: "panel", id: "gt-panel", role: "dialog", "aria-labelledby": "gt-title" });
  panel.hidden = true;
  var header = el("header");
  header.appendChild(el("h2", { id: "gt-title" }, "GPU Tutor"));
  var resetBtn = el("button", { type: "button", "aria-label": "Start a new conversation" }, "New");
  var closeBtn = el("button", { type: "button", "aria-label": "Close the chat" }, "×");
  header.appendChild(resetBtn);
  header.appendChild(closeBtn);
  var log = el("div", { class: "log", role: "log", "aria-live": "polite", "aria-label": "Conversation",
    tabindex: "0" });
  var typing = el("div", { class: "typing", "aria-hidden": "true" });
  typing.appendChild(el("span")); typing.appendChild(el("span")); typing.appendChild(el("span"));
  typing.hidden = true;
  var status = el("div", { class: "sr-only", role: "status" });
  var form = el("form");
  var label = el("label", { for: "gt-input", class: "sr-only" }, "Your message");
  var input = el("textarea", { id: "gt-input", rows: "1", maxlength: "2000",
    placeholder: "Answer, ask, or say \u201cquiz me\u201d" });
  var sendBtn = el("button", { type: "submit" }, "Send");
  form.appendChild(label); form.appendChild(input); form.appendChild(sendBtn);
  [header, log, typing, status, form].forEach(function (n) { panel.appendChild(n); });
  root.appendChild(launcher);
  root.appendChild(panel);

  // ---- rendering ------------------------------------------------------------------------------------------
  var INLINE = /(\*\*[^*\n]+\*\*|`[^`\n]+`|_[^_\n]+_|\[\d{1,2}\])/;

  function inline(parent, text) {
    text.split(INLINE).forEach(function (part, i) {
      if (!part) return;
      if (i % 2 === 0) { parent.appendChild(document.createTextNode(part)); return; }
      if (part.slice(0, 2) === "**") parent.appendChild(el("strong", {}, part.slice(2, -2)));
      else if (part[0] === "`") parent.appendChild(el("code", {}, part.slice(1, -1)));
      else if (part[0] === "_") parent.appendChild(el("em", {}, part.slice(1, -1)));
      else parent.appendChild(el("span", { class: "ref", "aria-label": "source " + part.slice(1, -1) }, part));
    });
  }

  /* A Markdown subset: paragraphs, "- " bullets, **bold**, `code`, _em_, [n] references. Never HTML. */
  function markdown(text) {
    var box = el("div", { class: "body" });
    var list = null;
    String(text || "").split("\n").forEach(function (line) {
      if (/^\s*-\s+/.test(line)) {
        if (!list) { list = el("ul"); box.appendChild(list); }
        var li = el("li"); inline(li, line.replace(/^\s*-\s+/, "")); list.appendChild(li);
      } else if (line.trim()) {
        list = null;
        var p = el("p"); inline(p, line); box.appendChild(p);
      }
    });
    return box;
  }

  function citation(c) {
    var d = el("details", { class: "cite" });
    var lines = c.lines && c.lines.length ? " \u00b7 lines " + c.lines[0] + "\u2013" + c.lines[c.lines.length - 1] : "";
    var where = c.number != null ? " \u00b7 question " + c.number : (c.section ? " \u00b7 " + c.section : "");
    d.appendChild(el("summary", {}, "[" + c.n + "] " + c.file + where + lines));
    if (c.question) d.appendChild(el("p", { class: "q" }, "Q: " + c.question));
    if (c.snippet) d.appendChild(el("blockquote", {}, c.snippet));
    if (c.note) d.appendChild(el("p", { class: "note" }, c.note));
    if (c.passage_id && PASSAGE_ID.test(c.passage_id)) d.appendChild(passageLink(c.passage_id));
    return d;
  }

  /* A study-note citation opens its passage on the tutor's study page: in place when the widget sits on
     that page (a hash change), in a new tab from any other site. */
  function passageLink(id) {
    var url = API + "/#passage=" + id;
    var here = location.origin + location.pathname === API + "/";
    var a = el("a", { class: "open-passage", href: url }, "Open in the notes");
    if (!here) { a.setAttribute("target", "_blank"); a.setAttribute("rel", "noopener"); }
    return a;
  }

  function buttons(items, cls) {
    var box = el("div", { class: "buttons " + cls });
    items.forEach(function (item) {
      var b = el("button", { type: "button" }, item.label);
      b.addEventListener("click", function () { send(item.value || item.text || item.label); });
      box.appendChild(b);
    });
    return box;
  }

  function chart(c) {
    var fig = el("figure", { class: "chart" });
    if (c.image && IMAGE_URL.test(c.image)) {
      var img = el("img", { alt: c.title + (c.summary ? ": " + c.summary : "") });
      img.src = c.image;
      fig.appendChild(img);
    }
    fig.appendChild(el("figcaption", {}, c.title));
    return fig;
  }

  function scroll() { log.scrollTop = log.scrollHeight; }

  function addLearner(text) {
    log.appendChild(el("div", { class: "msg learner" }, text));
    scroll();
  }

  function addReply(r) {
    var box = el("div", { class: "msg tutor", "data-kind": r.kind || "info" });
    if (r.question_id) box.setAttribute("data-question", r.question_id);
    box.appendChild(markdown(r.text));
    if (r.chart) box.appendChild(chart(r.chart));
    (r.citations || []).forEach(function (c) { box.appendChild(citation(c)); });
    if (r.choices && r.choices.length) box.appendChild(buttons(r.choices, "choices"));
    var says = (r.actions || []).filter(function (a) { return a.type === "say"; });
    if (says.length) box.appendChild(buttons(says, "actions"));
    log.appendChild(box);
    scroll();
    return box;
  }

  function addError(message) {
    var box = el("div", { class: "msg tutor error", role: "alert" }, message);
    log.appendChild(box);
    scroll();
  }

  var runs = {};
  function progress(ev) {
    var row = runs[ev.run_id];
    if (!row) {
      row = { box: el("div", { class: "msg tutor run", "data-run": ev.run_id }), bar: el("progress", { max: "1" }) };
      row.text = el("div");
      row.box.appendChild(row.text); row.box.appendChild(row.bar);
      runs[ev.run_id] = row;
      log.appendChild(row.box);
    }
    row.text.textContent = (ev.message || ev.status || "running") + (ev.fraction != null ?
      " (" + Math.round(100 * ev.fraction) + "%)" : "");
    if (ev.fraction != null) row.bar.value = ev.fraction;
    scroll();
  }

  function intro() {
    addReply({ kind: "intro", text: "Hi! I'm your GPU tutor. Ask me a question, or try one of these:",
      actions: [{ type: "say", label: "Quiz me", text: "quiz me" },
        { type: "say", label: "What is reduce-scatter?", text: "what is reduce-scatter?" },
        { type: "say", label: "How am I doing?", text: "how am I doing?" }] });
  }

  // ---- talking to the API --------------------------------------------------------------------------------
  function headers() {
    var h = { "Content-Type": "application/json", Accept: "text/event-stream" };
    if (state.token) h.Authorization = "Bearer " + state.token;
    return h;
  }

  function handle(event, data) {
    if (event === "meta") {
      if (data.token) state.token = data.token;
      state.conversationId = data.conversation_id;
      saveStore();
    } else if (event === "reply") {
      addReply(data);
      status.textContent = "New message from the tutor";
    } else if (event === "progress") {
      progress(data);
    } else if (event === "error") {
      addError(data.message || "Something went wrong.");
    }
  }

  function frames(buffer, onFrame) {
    var at;
    while ((at = buffer.indexOf("\n\n")) >= 0) {
      var frame = buffer.slice(0, at); buffer = buffer.slice(at + 2);
      var event = "message", data = "";
      frame.split("\n").forEach(function (line) {
        if (line.indexOf("event:") === 0) event = line.slice(6).trim();
        else if (line.indexOf("data:") === 0) data += line.slice(5).trim();
      });
      try { onFrame(event, data ? JSON.parse(data) : {}); } catch (e) { /* a bad frame is skipped */ }
    }
    return buffer;
  }

  var busy = false;
  function setBusy(on) {
    busy = on; typing.hidden = !on; sendBtn.disabled = on;
    log.setAttribute("aria-busy", on ? "true" : "false");
  }

  async function send(text) {
    text = String(text || "").trim();
    if (!text || busy) return;
    open();
    addLearner(text);
    setBusy(true);
    try {
      var res = await fetch(API + "/v1/chat/stream", { method: "POST", headers: headers(),
        body: JSON.stringify({ message: text, conversation_id: state.conversationId || null }) });
      if (res.status === 401) forget();
      if (res.status === 403 || res.status === 404) { state.conversationId = null; saveStore(); }
      if (!res.ok || !res.body) {
        var body = await res.json().catch(function () { return {}; });
        addError((body.error && body.error.message) || "The tutor is unavailable (" + res.status + ").");
        return;
      }
      var reader = res.body.getReader(), decoder = new TextDecoder(), buffer = "";
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer = frames(buffer + decoder.decode(chunk.value, { stream: true }), handle);
      }
    } catch (e) {
      addError("I couldn't reach the tutor. Check your connection and try again.");
    } finally {
      setBusy(false);
    }
  }

  function forget() { state = {}; saveStore(); }

  var loaded = false;
  async function loadHistory() {
    if (loaded) return;
    loaded = true;
    if (!state.token || !state.conversationId) { intro(); return; }
    try {
      var res = await fetch(API + "/v1/chat/conversations/" + encodeURIComponent(state.conversationId),
        { headers: { Authorization: "Bearer " + state.token } });
      if (!res.ok) { if (res.status < 500) forget(); intro(); return; }
      var conv = await res.json();
      if (!conv.messages.length) intro();
      conv.messages.forEach(function (m) {
        if (m.role === "learner") addLearner(m.text); else addReply(m.reply || { kind: "info", text: m.text });
      });
    } catch (e) { intro(); }
  }

  function open() {
    if (panel.hidden) {
      panel.hidden = false;
      launcher.setAttribute("aria-expanded", "true");
      loadHistory();
      input.focus();
    }
  }
  function close() {
    panel.hidden = true;
    launcher.setAttribute("aria-expanded", "false");
    launcher.focus();
  }
  async function reset() {
    log.textContent = ""; runs = {};
    try {
      var res = await fetch(API + "/v1/chat/conversations", { method: "POST", headers: headers() });
      if (res.ok) {
        var conv = await res.json();
        if (conv.token) state.token = conv.token;
        state.conversationId = conv.id; saveStore();
      }
    } catch (e) { /* the next message starts one */ }
    intro(); input.focus();
  }

  launcher.addEventListener("click", function () { if (panel.hidden) open(); else close(); });
  closeBtn.addEventListener("click", close);
  resetBtn.addEventListener("click", reset);
  panel.addEventListener("keydown", function (e) { if (e.key === "Escape") { e.preventDefault(); close(); } });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
  });
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = input.value;
    input.value = "";
    send(text);
  });

  function mount() { document.body.appendChild(host); }
  if (document.body) mount(); else document.addEventListener("DOMContentLoaded", mount);
  window.GPUTutor = { open: open, close: close, send: send, reset: reset };
  window.dispatchEvent(new Event("gpu-tutor:ready"));
})();
