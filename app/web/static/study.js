/* The study page: topics on the left, the chosen topic's notes (bank explanations with sources) on the right. */
(function () {
  "use strict";
  var topicsEl = document.getElementById("topics");
  var reading = document.getElementById("reading");

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

  function show(topic, button) {
    topicsEl.querySelectorAll("button").forEach(function (b) { b.removeAttribute("aria-current"); });
    button.setAttribute("aria-current", "true");
    fetch("/v1/study/topics/" + encodeURIComponent(topic.id)).then(function (r) { return r.json(); })
      .then(function (data) {
        reading.textContent = "";
        reading.appendChild(el("h2", {}, topic.name));
        var quiz = el("button", { type: "button", class: "quiz" }, "Quiz me on " + topic.name);
        quiz.addEventListener("click", function () { tutor(function (t) { t.send("quiz me on " + topic.name); }); });
        reading.appendChild(quiz);
        (data.notes || []).forEach(function (n) {
          var box = el("section", { class: "note" });
          box.appendChild(el("p", {}, n.text));
          box.appendChild(el("p", { class: "src" },
            n.source.file + " \u00b7 question " + n.source.number + " \u00b7 lines " + n.source.lines.join("\u2013")));
          reading.appendChild(box);
        });
        if (!(data.notes || []).length) reading.appendChild(el("p", {}, "No notes for this topic yet."));
      });
  }

  fetch("/v1/topics").then(function (r) { return r.json(); }).then(function (topics) {
    topicsEl.textContent = "";
    topics.filter(function (t) { return t.count > 0; }).forEach(function (t) {
      var li = el("li");
      var b = el("button", { type: "button", "data-topic": t.id });
      b.appendChild(el("span", {}, t.name));
      b.appendChild(el("span", { class: "count" }, t.count));
      b.addEventListener("click", function () { show(t, b); });
      li.appendChild(b);
      topicsEl.appendChild(li);
    });
  }).catch(function () { topicsEl.textContent = "The tutor is starting; reload in a moment."; });
})();
