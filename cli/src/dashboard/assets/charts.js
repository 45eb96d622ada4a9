// The charts page: fetches /api/history (the URL in #charts' data-src) and
// draws, per queue, every QUEUED job with the oldest one's age (the same count
// as `status` and /metrics), then per pipeline the jobs per point (processed,
// failed, STALE), with uPlot. Times on the axes and in the legends are in the
// page's clock (<html data-tz>: UTC unless the operator chose local), 24-hour.
(function () {
  "use strict";
  function two(n) { return (n < 10 ? "0" : "") + n; }
  // parts of the time `s` (seconds since the epoch) in the page's clock
  function parts(s, local) {
    var d = new Date(s * 1000);
    if (local) {
      return { y: d.getFullYear(), mo: d.getMonth() + 1, d: d.getDate(), h: d.getHours(), mi: d.getMinutes() };
    }
    return { y: d.getUTCFullYear(), mo: d.getUTCMonth() + 1, d: d.getUTCDate(), h: d.getUTCHours(), mi: d.getUTCMinutes() };
  }
  function label(s, step, local, full) {
    var p = parts(s, local);
    var date = p.y + "-" + two(p.mo) + "-" + two(p.d);
    var time = two(p.h) + ":" + two(p.mi);
    var zone = local ? "" : "Z";
    var short = two(p.mo) + "-" + two(p.d);
    if (full) { return step >= 86400 ? date : date + " " + time + zone; }
    if (step >= 86400) { return short; }
    if (step >= 3600) { return short + " " + time + zone; }
    return time + zone;
  }
  function timeAxis(step, local) {
    return {
      space: step >= 3600 ? 110 : 60,
      values: function (u, splits) {
        return splits.map(function (s) { return label(s, step, local, false); });
      }
    };
  }
  function timeSeries(step, local) {
    return { label: "time", value: function (u, s) { return s == null ? "-" : label(s, step, local, true); } };
  }
  function card(root, q, title) {
    var box = document.createElement("section");
    box.className = "card chart";
    box.setAttribute("data-queue", q.queue);
    var h = document.createElement("h2");
    h.textContent = title;
    box.appendChild(h);
    root.appendChild(box);
    return box;
  }
  function draw(root, data) {
    var width = Math.max(320, Math.min(1000, root.clientWidth - 24));
    var local = data.zone === "local";
    var step = data.step_s;
    var drawn = 0;
    data.queues.forEach(function (q) {
      var box = card(root, q, q.queue + " · waiting (every QUEUED job)");
      box.setAttribute("data-kind", "waiting");
      new uPlot({
        title: "Waiting: ready, delayed, parked, flow-control (now " + q.waiting_now + ")",
        width: width,
        height: 220,
        scales: { x: { time: false }, n: {}, s: {} },
        series: [
          timeSeries(step, local),
          { label: "waiting jobs", stroke: "#2c6fbb", width: 2, scale: "n", spanGaps: true, points: { show: true } },
          { label: "oldest waiting (s)", stroke: "#8e44ad", width: 2, scale: "s", spanGaps: true, points: { show: true } }
        ],
        axes: [timeAxis(step, local), { scale: "n" }, { scale: "s", side: 1, grid: { show: false } }]
      }, [q.t, q.waiting, q.oldest_s], box);
      drawn += 1;
      q.pipelines.forEach(function (p) {
        var s = q.series[p];
        var pbox = card(root, q, q.queue + " · " + p);
        pbox.setAttribute("data-pipeline", p);
        new uPlot({
          title: step >= 86400 ? "Jobs per day" : step >= 3600 ? "Jobs per hour" : "Jobs per minute",
          width: width,
          height: 220,
          scales: { x: { time: false } },
          series: [
            timeSeries(step, local),
            { label: "processed", stroke: "#2e8b57", width: 2 },
            { label: "failed", stroke: "#c0392b", width: 2 },
            { label: "STALE", stroke: "#e67e22", width: 2 }
          ],
          axes: [timeAxis(step, local), {}]
        }, [q.t, s.succeeded, s.failed, s.stale], pbox);
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
