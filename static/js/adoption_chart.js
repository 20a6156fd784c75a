// The adoption page's chart: GPU-hours per week through the portal and outside
// it (left axis) and GPUs allocated as a share of all GPUs (percent, right axis), drawn with uPlot
// (static/vendor/, MIT) from the page's own JSON (#adoption-series, the same numbers as the table).
(function () {
  "use strict";

  function message(box, text) {
    box.textContent = "";
    var p = document.createElement("p");
    p.className = "muted small";
    p.textContent = text;
    box.appendChild(p);
  }

  function start() {
    var box = document.querySelector("[data-adoption-chart]");
    var source = document.getElementById("adoption-series");
    if (!box || !source) { return; }
    if (!window.uPlot) { message(box, "The chart library did not load; the table below has the numbers."); return; }
    var s = JSON.parse(source.textContent);
    var t = s.weeks.map(function (day) { return Date.parse(day + "T00:00:00Z") / 1000; });
    var opts = {
      width: Math.max(300, box.clientWidth || 600),
      height: 280,
      series: [
        {},
        {label: "Portal GPU-hours", scale: "h", stroke: "#1f6feb", width: 2, points: {show: true}},
        {label: "Outside GPU-hours", scale: "h", stroke: "#9a6700", width: 2, dash: [6, 4], points: {show: true}},
        {label: "GPUs allocated %", scale: "%", stroke: "#1a7f37", width: 1, points: {show: true}, spanGaps: false},
      ],
      scales: {x: {time: true}, h: {range: function (u, lo, hi) { return [0, Math.max(1, hi || 0) * 1.05]; }}, "%": {range: [0, 100]}},
      axes: [{}, {scale: "h", label: "GPU-hours"}, {scale: "%", side: 1, label: "allocated %", grid: {show: false}}],
    };
    box.textContent = "";
    box.dataset.points = String(t.length);
    new window.uPlot(opts, [t, s.gpu_hours_portal, s.gpu_hours_outside, s.gpu_share_percent], box);
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
