// leasehold dashboard: live refresh without a build step.
//
// Every 2 s, while the tab is visible and "live" is ticked, fetch this page's
// URL again and swap each element marked data-live (matched by id) with the
// fresh one. The server renders and escapes all HTML; this script only moves
// parsed nodes, it never builds markup from data. Elements marked
// data-live="idle" (the action forms) are swapped only while nobody is typing
// in them. A 503 error page reloads itself once Redis answers again.
(function () {
  "use strict";
  var PERIOD_MS = 2000;
  var OPERATOR_KEY = "leasehold.operator";

  function qsa(root, sel) {
    return Array.prototype.slice.call(root.querySelectorAll(sel));
  }

  function dirty(el) {
    if (el.contains(document.activeElement) && document.activeElement !== document.body) {
      return true;
    }
    return qsa(el, "input, textarea, select").some(function (f) {
      if (f.type === "radio" || f.type === "checkbox") {
        return f.checked !== f.defaultChecked;
      }
      if (f.tagName === "SELECT") {
        return qsa(f, "option").some(function (o) { return o.selected !== o.defaultSelected; });
      }
      return f.value !== f.defaultValue;
    });
  }

  // the operator name is remembered in this browser (never the token)
  function rememberOperator() {
    var saved = "";
    try { saved = window.localStorage.getItem(OPERATOR_KEY) || ""; } catch (e) { /* private mode */ }
    qsa(document, "input[name=operator]").forEach(function (input) {
      if (saved && !input.value) {
        input.value = saved;
        input.defaultValue = saved;
      }
      if (!input.dataset.bound) {
        input.dataset.bound = "1";
        input.addEventListener("change", function () {
          try { window.localStorage.setItem(OPERATOR_KEY, input.value.trim()); } catch (e) { /* ignore */ }
        });
      }
    });
  }

  function setStatus(text, bad) {
    var s = document.getElementById("live-status");
    if (!s) { return; }
    s.textContent = text;
    s.className = bad ? "bad" : "";
  }

  // the page's clock (UTC unless the operator chose local), 24-hour
  function local() {
    return document.documentElement.getAttribute("data-tz") === "local";
  }

  function stamp() {
    var d = new Date();
    var two = function (n) { return (n < 10 ? "0" : "") + n; };
    if (local()) {
      return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
    }
    return two(d.getUTCHours()) + ":" + two(d.getUTCMinutes()) + ":" + two(d.getUTCSeconds()) + "Z";
  }

  // a list's checkboxes: "check every row" and the count beside the buttons
  function bindPicks() {
    document.addEventListener("change", function (ev) {
      var t = ev.target;
      if (!t || t.type !== "checkbox") { return; }
      if (t.id === "pick-all") {
        qsa(document, "input.pick").forEach(function (c) { c.checked = t.checked; });
      }
      if (t.id === "pick-all" || t.classList.contains("pick")) {
        var n = qsa(document, "input.pick:checked").length;
        var label = document.getElementById("checked-count");
        if (label) { label.textContent = "With the " + n + (n === 1 ? " row" : " rows") + " checked: "; }
      }
    });
  }

  // the UTC/local switch comes back to this page
  function bindZoneSwitch() {
    qsa(document, "a.tz-choice").forEach(function (a) {
      var base = a.getAttribute("href").split("&back=")[0];
      a.setAttribute("href", base + "&back=" + encodeURIComponent(window.location.pathname + window.location.search));
    });
  }

  var busy = false;

  function tick() {
    var toggle = document.getElementById("live-toggle");
    if (busy || document.hidden || (toggle && !toggle.checked)) { return; }
    var errorPage = document.querySelector("section.error[data-status='503']");
    var regions = qsa(document, "[data-live]");
    if (!errorPage && regions.length === 0) { return; }
    busy = true;
    fetch(window.location.href, { headers: { "Accept": "text/html", "X-Leasehold-Tz": local() ? "local" : "utc" }, cache: "no-store", credentials: "same-origin" })
      .then(function (resp) {
        return resp.text().then(function (text) { return { resp: resp, text: text }; });
      })
      .then(function (r) {
        if (errorPage) {
          if (r.resp.ok) { window.location.reload(); }
          else { setStatus("still unavailable (" + r.resp.status + ") at " + stamp(), true); }
          return;
        }
        var doc = new DOMParser().parseFromString(r.text, "text/html");
        if (!r.resp.ok) {
          var msg = doc.querySelector("section.error .message");
          setStatus("refresh failed (" + r.resp.status + (msg ? ": " + msg.textContent : "") + ") at " + stamp(), true);
          return;
        }
        regions.forEach(function (el) {
          if (!el.id) { return; }
          var fresh = doc.getElementById(el.id);
          if (!fresh) { return; }
          if (el.getAttribute("data-live") === "idle" && dirty(el)) { return; }
          // what the operator opened or closed (a log tail, the outputs) stays so
          var open = {};
          qsa(el, "details[id]").forEach(function (d) { open[d.id] = d.open; });
          var node = document.adoptNode(fresh);
          qsa(node, "details[id]").forEach(function (d) {
            if (Object.prototype.hasOwnProperty.call(open, d.id)) { d.open = open[d.id]; }
          });
          el.replaceWith(node);
        });
        rememberOperator();
        setStatus("updated " + stamp(), false);
      })
      .catch(function (e) {
        setStatus("refresh failed: " + e + " at " + stamp(), true);
      })
      .then(function () { busy = false; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    rememberOperator();
    bindZoneSwitch();
    bindPicks();
    setInterval(tick, PERIOD_MS);
  });
})();
