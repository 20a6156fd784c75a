// The job page's GPU chart: SM activity (%, left axis) and memory used (MiB, right axis)
// of each GPU over the job's life, drawn with uPlot (static/vendor/, MIT) from the JSON of
// jobs/web/usage_views.py: job_gpu_series. Refetched every 15 s while the job runs; the server answers
// from its cache (one Prometheus range query per job and interval, however many people watch).
(function () {
  "use strict";
  var COLOURS = ["#1f6feb", "#d1242f", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0a7ea4", "#6e7781"];

  function message(box, text) {
    box.textContent = "";
    var p = document.createElement("p");
    p.className = "muted small";
    p.textContent = text;
    box.appendChild(p);
  }

  function draw(box, answer) {
    if (answer.error) { message(box, "GPU usage unavailable: " + answer.error); return; }
    if (!answer.t.length) { message(box, "No GPU figures over time yet."); return; }
    var data = [answer.t];
    var series = [{}];
    answer.gpus.forEach(function (gpu, i) {
      var colour = COLOURS[i % COLOURS.length];
      data.push(gpu.sm_active);
      series.push({label: gpu.label + " SM active %", scale: "%", stroke: colour, width: 2});
      data.push(gpu.memory_used_mib);
      series.push({label: gpu.label + " memory MiB", scale: "MiB", stroke: colour, width: 1, dash: [6, 4]});
    });
    var opts = {
      width: Math.max(300, box.clientWidth || 600),
      height: 260,
      series: series,
      // both axes from 0: an idle GPU reads as a flat line at the bottom, not a wiggle mid-chart
      scales: {x: {time: true}, "%": {range: [0, 100]}, MiB: {range: function (u, lo, hi) { return [0, Math.max(1, hi || 0) * 1.05]; }}},
      axes: [{}, {scale: "%", label: "SM active %"}, {scale: "MiB", side: 1, label: "memory used, MiB", grid: {show: false}}],
    };
    box.textContent = "";
    box.dataset.points = String(answer.t.length);
    new window.uPlot(opts, data, box);
  }

  function load(box) {
    fetch(box.dataset.gpuChart, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) { return r.json(); })
      .then(function (answer) { draw(box, answer); })
      .catch(function () { message(box, "The chart could not be loaded."); });
  }

  function start() {
    document.querySelectorAll("[data-gpu-chart]").forEach(function (box) {
      if (!window.uPlot) { message(box, "The chart library did not load."); return; }
      load(box);
      if (box.dataset.live) { setInterval(function () { load(box); }, 15000); }
    });
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
