// The handout site's behaviour (servelab.site.build): a copy button on each piece of code, and a line
// above each table that is wider than its box saying that it scrolls sideways.
(function () {
  "use strict";
  // div.table-wrapper: the box Furo puts around a prose table (00's overview, the index's facts)
  var SCROLLERS = "div.cell_output table, .servelab-compare table, div.table, table.data, div.table-wrapper";

  function copyText(text, button) {
    var done = function () {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(text); done(); });
    } else {
      fallback(text);
      done();
    }
  }

  function fallback(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    document.body.removeChild(area);
  }

  function addCopyButtons() {
    document.querySelectorAll("div.highlight > pre").forEach(function (pre) {
      var holder = pre.parentElement.parentElement;  // the block around the scrolling box: the button stays put
      if (!holder || holder.querySelector(":scope > button.servelab-copy")) { return; }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "servelab-copy";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "copy this code");
      button.addEventListener("click", function () { copyText(pre.innerText, button); });
      holder.classList.add("servelab-copyable");
      holder.insertBefore(button, holder.firstChild);
    });
  }

  function markScrolling() {
    document.querySelectorAll(SCROLLERS).forEach(function (box) {
      var wide = box.scrollWidth > box.clientWidth + 1;
      var hint = box.previousElementSibling;
      var hinted = hint && hint.classList.contains("servelab-scroll-hint");
      if (wide && !hinted) {
        hint = document.createElement("p");
        hint.className = "servelab-scroll-hint";
        hint.textContent = "\u21c6 wider than the screen: scroll sideways";
        box.parentElement.insertBefore(hint, box);
      } else if (!wide && hinted) {
        hint.remove();
      }
    });
  }

  function start() {
    addCopyButtons();
    markScrolling();
    window.addEventListener("resize", markScrolling);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
