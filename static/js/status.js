// Live status of a queued or running evaluation on the submission page.
// The element #live-status carries the API URL in data-status-url; every 2 s
// we ask the API and reload the page once the evaluation has finished.
(function () {
  "use strict";
  var badge = document.getElementById("live-status");
  if (!badge || !badge.dataset.statusUrl) {
    return;
  }
  var url = badge.dataset.statusUrl;
  var note = document.getElementById("live-job");
  var PENDING = ["queued", "running"];

  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (data) {
        var status = data.evaluation ? data.evaluation.status : null;
        if (status && PENDING.indexOf(status) === -1) {
          window.location.reload();
          return;
        }
        if (status) {
          badge.textContent = status;
          badge.className = "status status-" + status;
        }
        if (note && data.evaluation && data.evaluation.job) {
          note.textContent = data.evaluation.job.next_step;
        }
        window.setTimeout(poll, 2000);
      })
      .catch(function () {
        // A transient network error: keep trying, a little slower.
        window.setTimeout(poll, 5000);
      });
  }

  window.setTimeout(poll, 2000);
})();
