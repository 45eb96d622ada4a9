// The charts page: fetches /api/history (the URL in #charts' data-src) and
// draws, per queue and pipeline, jobs per minute (processed, failed, STALE)
// and the waiting jobs with the oldest one's age, with uPlot.
(function () {
  "use strict";
  function draw(root, data) {
    var width = Math.max(320, Math.min(1000, root.clientWidth - 24));
    var drawn = 0;
    data.queues.forEach(function (q) {
      q.pipelines.forEach(function (p) {
        var s = q.series[p];
        var box = document.createElement("section");
        box.className = "card chart";
        box.setAttribute("data-queue", q.queue);
        box.setAttribute("data-pipeline", p);
        var h = document.createElement("h2");
        h.textContent = q.queue + " · " + p;
        box.appendChild(h);
        root.appendChild(box);
        new uPlot({
          title: "Jobs per minute",
          width: width,
          height: 220,
          series: [
            {},
            { label: "processed", stroke: "#2e8b57", width: 2 },
            { label: "failed", stroke: "#c0392b", width: 2 },
            { label: "STALE", stroke: "#e67e22", width: 2 }
          ]
        }, [q.t, s.succeeded, s.failed, s.stale], box);
        new uPlot({
          title: "Waiting",
          width: width,
          height: 220,
          scales: { n: {}, s: {} },
          series: [
            {},
            { label: "waiting jobs", stroke: "#2c6fbb", width: 2, scale: "n", spanGaps: true, points: { show: true } },
            { label: "oldest waiting (s)", stroke: "#8e44ad", width: 2, scale: "s", spanGaps: true, points: { show: true } }
          ],
          axes: [{}, { scale: "n" }, { scale: "s", side: 1, grid: { show: false } }]
        }, [q.t, s.waiting, s.oldest_s], box);
        drawn += 1;
      });
    });
    root.setAttribute("data-drawn", String(drawn));
  }
  function start() {
    var root = document.getElementById("charts");
    if (!root || typeof uPlot === "undefined") return;
    fetch(root.getAttribute("data-src"), { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (data) { draw(root, data); })
      .catch(function (e) { root.textContent = "cannot load the charts: " + e; });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
