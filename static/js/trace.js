// Trace viewer: open the event a link points at (#line-N, e.g. "Jump to the final
// kernel") and offer "expand all" for the page's folded messages and results.
(function () {
  "use strict";

  function openTarget() {
    if (!window.location.hash) {
      return;
    }
    var target = document.getElementById(window.location.hash.slice(1));
    if (!target) {
      return;
    }
    target.querySelectorAll("details").forEach(function (d) {
      d.open = true;
    });
    target.classList.add("ev-target");
    target.scrollIntoView({ block: "start" });
  }

  var expand = document.querySelector(".js-expand-all");
  if (expand) {
    expand.hidden = false;
    expand.addEventListener("click", function () {
      document.querySelectorAll(".timeline details").forEach(function (d) {
        d.open = true;
      });
    });
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
})();
