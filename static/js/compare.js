// The paired comparison page: draw the Plotly figure the server built (leaderboard.comparison_figures).
// No inline scripts: the figure comes from a <script type="application/json"> written by json_script.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var data = document.getElementById("compare-figure-data");
    var target = document.getElementById("compare-figure");
    if (!data || !target || !window.Plotly) return;
    var figure = JSON.parse(data.textContent);
    window.Plotly.newPlot(target, figure.data, figure.layout, { responsive: true, displaylogo: false });
  });
})();
