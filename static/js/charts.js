// Draws every element carrying data-figure="<json_script id>" with plotly.js.
// Figures are built server-side (leaderboard/charts.py); nothing here knows their shape.
(function () {
  "use strict";
  function draw() {
    if (typeof window.Plotly === "undefined") {
      return;
    }
    document.querySelectorAll("[data-figure]").forEach(function (element) {
      var source = document.getElementById(element.dataset.figure);
      if (!source) {
        return;
      }
      var figure = JSON.parse(source.textContent);
      window.Plotly.newPlot(element, figure.data || [], figure.layout || {}, {
        displaylogo: false,
        responsive: true,
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
