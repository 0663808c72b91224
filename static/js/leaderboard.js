// Leaderboard pages: draw the Plotly figure the server built, and apply filters as soon as one
// changes (the Apply button still works without JavaScript). No inline scripts: the figure comes
// from a <script type="application/json"> written by Django's json_script.
(function () {
  "use strict";

  function drawFigure(targetId, dataId) {
    var data = document.getElementById(dataId);
    var target = document.getElementById(targetId);
    if (!data || !target || !window.Plotly) return;
    var figure = JSON.parse(data.textContent);
    window.Plotly.newPlot(target, figure.data, figure.layout, { responsive: true, displaylogo: false });
  }

  function submitFiltersOnChange() {
    var form = document.getElementById("leaderboard-filters");
    if (!form) return;
    // Leave empty filters out of the address, so a shared link says only what was chosen.
    form.addEventListener("formdata", function (event) {
      Array.from(event.formData.entries()).forEach(function (entry) {
        if (entry[1] === "") event.formData.delete(entry[0]);
      });
    });
    form.addEventListener("change", function (event) {
      // Number inputs wait for Apply (or Enter): submitting on each arrow click would reload per step.
      if (event.target.matches("select, input[type=checkbox]")) {
        form.requestSubmit();
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawFigure("leaderboard-figure", "leaderboard-figure-data");
    drawFigure("cost-figure", "cost-figure-data");  // cost against accuracy, home page only
    drawFigure("failure-figure", "failure-figure-data");  // outcome split by n, a system's page only
    drawFigure("curve-figure", "curve-figure-data");  // pass rate against n with its fit, a system's page only
    submitFiltersOnChange();
  });
})();
