/* The study page: topics on the left; the chosen topic's study notes on the right, each with its table of
   contents, the topic's questions and a "Quiz me on this" button. A citation link (`/#passage=<id>`, from
   the chat widget) opens the note that holds the passage and highlights it.
   Headings, questions and references are set as text; a passage's body is HTML the server rendered from
   Markdown with raw HTML off and then sanitised (app/web/notes.py). */
(function () {
  "use strict";
  var topicsEl = document.getElementById("topics");
  var reading = document.getElementById("reading");
  var topics = [];
  var PASSAGE_HASH = /^#passage=(p_[0-9a-f]{1,32})$/;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function tutor(fn) {
    if (window.GPUTutor) fn(window.GPUTutor);
    else window.addEventListener("gpu-tutor:ready", function () { fn(window.GPUTutor); }, { once: true });
  }

  function quizButton(topic) {
    var b = el("button", { type: "button", class: "quiz" }, "Quiz me on this");
    b.setAttribute("aria-label", "Quiz me on " + topic.name);
    b.addEventListener("click", function () { tutor(function (t) { t.send("quiz me on " + topic.name); }); });
    return b;
  }

  function reference(r) {
    var li = el("li");
    var who = r.authors || r.organisation || "";
    var when = r.year || r.version || "";
    li.appendChild(document.createTextNode([who, r.title, when].filter(Boolean).join(". ") + ". "));
    if (r.where && /^https?:\/\//.test(r.where)) {
      li.appendChild(el("a", { href: r.where, rel: "noopener noreferrer nofollow", target: "_blank" }, r.where));
    } else if (r.where) {
      li.appendChild(document.createTextNode(r.where));
    }
    return li;
  }

  function noteSection(note, topic, questions) {
    var box = el("section", { class: "note", "data-note": note.note, "aria-label": note.title });
    box.appendChild(el("h3", {}, note.title));
    var side = el("div", { class: "note-side" });
    var toc = el("nav", { class: "toc", "aria-label": "Contents of " + note.title });
    toc.appendChild(el("h4", {}, "Contents"));
    var list = el("ol");
    note.toc.forEach(function (h) {
      var li = el("li", { class: "level-" + h.level });
      var a = el("a", { href: "#" + h.anchor }, h.text);
      a.addEventListener("click", function (ev) {
        ev.preventDefault();
        var target = document.getElementById(h.anchor);
        if (target) { target.scrollIntoView({ block: "start" }); target.focus({ preventScroll: true }); }
        history.replaceState(null, "", "#" + h.anchor);
      });
      li.appendChild(a);
      list.appendChild(li);
    });
    toc.appendChild(list);
    side.appendChild(toc);
    var qs = el("div", { class: "questions" });
    qs.appendChild(el("h4", {}, "Questions on " + topic.name));
    var qlist = el("ul");
    questions.forEach(function (q) { qlist.appendChild(el("li", {}, q.text)); });
    qs.appendChild(qlist);
    qs.appendChild(quizButton(topic));
    side.appendChild(qs);
    box.appendChild(side);

    note.blocks.forEach(function (b) {
      if (b.type === "heading") {
        var h = el(b.level > 1 ? "h5" : "h4", { id: b.anchor, tabindex: "-1", class: "section" }, b.text);
        box.appendChild(h);
        if (b.questions.length) {
          var explains = el("p", { class: "explains" }, "Explains: " + b.questions.map(function (q) {
            return "\u201c" + q.text + "\u201d";
          }).join(" \u00b7 "));
          box.appendChild(explains);
        }
      } else {
        var p = el("div", { class: "passage", id: b.anchor, tabindex: "-1", "data-lines": b.lines.join("-") });
        p.innerHTML = b.html; // server-rendered, raw HTML disabled and sanitised (app/web/notes.py)
        box.appendChild(p);
      }
    });
    if (note.references.length) {
      box.appendChild(el("h4", {}, "References"));
      var refs = el("ol", { class: "refs" });
      note.references.forEach(function (r) { refs.appendChild(reference(r)); });
      box.appendChild(refs);
    }
    return box;
  }

  function select(topic) {
    topicsEl.querySelectorAll("button").forEach(function (b) {
      if (b.getAttribute("data-topic") === topic.id) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    });
  }

  function show(topic) {
    select(topic);
    return fetch("/v1/study/topics/" + encodeURIComponent(topic.id)).then(function (r) { return r.json(); })
      .then(function (data) {
        reading.textContent = "";
        reading.appendChild(el("h2", {}, topic.name));
        var questions = data.questions || [];
        (data.notes || []).forEach(function (n) { reading.appendChild(noteSection(n, topic, questions)); });
        if (!(data.notes || []).length) {
          reading.appendChild(el("p", {}, "No notes for this topic yet."));
          reading.appendChild(quizButton(topic));
        }
      });
  }

  function openPassage(id) {
    return fetch("/v1/study/passages/" + encodeURIComponent(id)).then(function (r) {
      if (!r.ok) throw new Error("no passage");
      return r.json();
    }).then(function (place) {
      var topic = topics.filter(function (t) { return place.topics.indexOf(t.id) >= 0; })[0];
      if (!topic) return;
      var shown = document.getElementById(place.anchor) ? Promise.resolve() : show(topic);
      return shown.then(function () {
        var target = document.getElementById(place.anchor);
        if (!target) return;
        reading.querySelectorAll(".passage.cited").forEach(function (n) { n.classList.remove("cited"); });
        target.classList.add("cited");
        target.scrollIntoView({ block: "center" });
        target.focus({ preventScroll: true });
      });
    }).catch(function () {
      reading.textContent = "";
      reading.appendChild(el("p", { role: "alert" }, "That passage is no longer in the notes."));
    });
  }

  function route() {
    var m = PASSAGE_HASH.exec(location.hash);
    if (m) openPassage(m[1]);
  }

  window.addEventListener("hashchange", route);
  fetch("/v1/topics").then(function (r) { return r.json(); }).then(function (list) {
    topics = list.filter(function (t) { return t.count > 0; });
    topicsEl.textContent = "";
    topics.forEach(function (t) {
      var li = el("li");
      var b = el("button", { type: "button", "data-topic": t.id });
      b.appendChild(el("span", {}, t.name));
      b.appendChild(el("span", { class: "count" }, t.count));
      b.addEventListener("click", function () { show(t); });
      li.appendChild(b);
      topicsEl.appendChild(li);
    });
    route();
  }).catch(function () { topicsEl.textContent = "The tutor is starting; reload in a moment."; });
})();
