// The status page's script: sign-in with an admin API key kept in
// sessionStorage, the current tables from /ui/data every 2 s, and plots of
// the last 15 minutes from /ui/history every 5 s, drawn as SVG. Every value
// is written with textContent (or as SVG text): nothing the node answers is
// ever parsed as markup. No request leaves this origin.
"use strict";
(function () {
  var KEY = "latent-node.admin-key";
  var TABLES_MS = 2000, HISTORY_MS = 5000, MAX_POINTS = 180, TOP = 8;
  var SVGNS = "http://www.w3.org/2000/svg";
  // Okabe-Ito, readable with every common colour-vision deficiency; lines
  // also differ by dash pattern, so no series is told by colour alone.
  var COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999", "#F0E442"];
  var DASHES = ["", "6 3", "2 3"];

  var $ = function (id) { return document.getElementById(id); };
  var status = $("status"), form = $("signin"), keyInput = $("key"), signinError = $("signin-error");
  var dashboard = $("dashboard"), signout = $("signout");
  var key = null, timers = [], points = [], refreshes = 0, plotted = 0, generation = 0;

  function AuthError(message) { this.message = message; }

  // api GETs path with the key; a refused key is an AuthError naming why.
  function api(path) {
    return fetch(path, {cache: "no-store", credentials: "omit", headers: {"Authorization": "Bearer " + key}})
      .then(function (r) {
        if (r.status === 401 || r.status === 403) {
          return r.json().catch(function () { return {}; }).then(function (p) {
            throw new AuthError((p.title || ("HTTP " + r.status)) + (p.detail ? ": " + p.detail : ""));
          });
        }
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.json();
      });
  }

  // session asks the node whether the key is an admin's: always 200, so
  // that a refused key logs no failed request in the console; the data
  // routes are asked only after it said yes.
  function session() {
    return api("/ui/session").then(function (s) {
      if (!s.admin) {
        var p = s.problem || {};
        throw new AuthError((p.title || "refused") + (p.detail ? ": " + p.detail : ""));
      }
    });
  }

  function showSignIn(message) {
    stop();
    key = null;
    points = [];
    dashboard.hidden = true;
    signout.hidden = true;
    form.hidden = false;
    signinError.textContent = message || "";
    status.textContent = "signed out";
    status.className = "";
    keyInput.value = "";
    keyInput.focus();
  }

  function stop() {
    generation++;
    timers.forEach(clearTimeout);
    timers = [];
  }

  function start() {
    stop();
    var gen = generation;
    form.hidden = true;
    dashboard.hidden = false;
    signout.hidden = false;
    var loop = function (fn, every) {
      var run = function () {
        if (gen !== generation) { return; }
        fn().catch(function (e) {
          if (e instanceof AuthError) {
            sessionStorage.removeItem(KEY);
            showSignIn("The key was refused (" + e.message + "). Sign in again with an admin API key.");
            return;
          }
          status.className = "failed";
          status.textContent = "refresh failed: " + e.message;
        }).finally(function () {
          if (gen === generation) { timers.push(setTimeout(run, every)); }
        });
      };
      run();
    };
    loop(refreshTables, TABLES_MS);
    loop(refreshHistory, HISTORY_MS);
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var k = keyInput.value.trim();
    if (!k) { return; }
    key = k;
    signinError.textContent = "";
    session().then(function () { return api("/ui/data"); }).then(function (d) {
      sessionStorage.setItem(KEY, k);
      keyInput.value = "";
      fillTables(d);
      start();
    }).catch(function (e) {
      key = null;
      signinError.textContent = e instanceof AuthError ?
        "That key was refused (" + e.message + "). Paste an API key with the admin role." :
        "The node did not answer: " + e.message;
      keyInput.select();
    });
  });
  signout.addEventListener("click", function () {
    sessionStorage.removeItem(KEY);
    showSignIn("Signed out.");
  });

  // --- human units ---
  function num(v, unit) {
    if (!isFinite(v)) { return "–"; }
    var a = Math.abs(v), s;
    if (a >= 1e9) { s = (v / 1e9).toFixed(1) + "G"; }
    else if (a >= 1e6) { s = (v / 1e6).toFixed(1) + "M"; }
    else if (a >= 1e4) { s = (v / 1e3).toFixed(0) + "k"; }
    else if (a >= 1e3) { s = (v / 1e3).toFixed(1) + "k"; }
    else if (a >= 10 || v === 0) { s = v.toFixed(0); }
    else { s = v.toFixed(1); }
    return s + (unit || "");
  }
  var fmt = {
    rate: function (v) { return num(v, "/s"); },
    count: function (v) { return num(v, ""); },
    ms: function (v) {
      if (!isFinite(v)) { return "–"; }
      if (v === 0) { return "0 ms"; }
      if (v < 1) { return (v * 1000).toFixed(0) + " µs"; }
      if (v < 1000) { return (v < 10 ? v.toFixed(1) : v.toFixed(0)) + " ms"; }
      return (v / 1000).toFixed(1) + " s";
    },
    bytes: function (v) {
      if (!isFinite(v)) { return "–"; }
      var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
      while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
      return (i === 0 || v >= 100 || v === Math.round(v) ? v.toFixed(0) : v.toFixed(1)) + " " + u[i];
    },
    pct: function (v) { return isFinite(v) ? (v * 100).toFixed(v < 0.1 ? 1 : 0) + " %" : "–"; }
  };

  // --- tables ---
  function refreshTables() {
    return session().then(function () { return api("/ui/data"); }).then(fillTables);
  }
  function fillTables(d) {
    var box = $("tables");
    var frag = document.createDocumentFragment();
    (d.tables || []).forEach(function (t) {
      var h = document.createElement("h2");
      h.textContent = t.title;
      var table = document.createElement("table");
      table.id = t.name;
      var tr = document.createElement("tr");
      (t.head || []).forEach(function (c) { var th = document.createElement("th"); th.textContent = c; tr.appendChild(th); });
      table.createTHead().appendChild(tr);
      var body = table.createTBody();
      (t.rows || []).forEach(function (row) {
        var r = document.createElement("tr");
        row.forEach(function (v) { var td = document.createElement("td"); td.textContent = v; r.appendChild(td); });
        body.appendChild(r);
      });
      frag.appendChild(h);
      frag.appendChild(table);
    });
    box.replaceChildren(frag);
    refreshes++;
    status.className = "";
    status.dataset.refreshes = String(refreshes);
    status.textContent = "updated " + new Date().toLocaleTimeString() + "; tables every 2 s, plots every 5 s";
  }

  // --- history ---
  function refreshHistory() {
    var since = points.length ? "?since=" + points[points.length - 1].t : "";
    return session().then(function () { return api("/ui/history" + since); }).then(function (h) {
      points = points.concat(h.points || []).slice(-MAX_POINTS);
      draw(h.interval_ms || HISTORY_MS);
    });
  }

  // series of name → value per point (undefined where absent).
  function byKeys(get) {
    var names = {};
    points.forEach(function (p) { Object.keys(get(p) || {}).forEach(function (k) { names[k] = true; }); });
    return Object.keys(names).sort().map(function (k) {
      return {name: k, values: points.map(function (p) { var m = get(p) || {}; return m[k] || 0; })};
    });
  }
  function line(name, get) {
    return {name: name, values: points.map(get)};
  }
  // tenants: the TOP busiest over the window by name, the rest summed as
  // "(others)" (for rates; for latencies the others' value is left out).
  function tenantSeries(field, summable) {
    var total = {};
    points.forEach(function (p) {
      (p.tenants || []).forEach(function (t) {
        if (t.name !== "(others)") { total[t.name] = (total[t.name] || 0) + t.answers_per_s + t.refusals_per_s; }
      });
    });
    var top = Object.keys(total).sort(function (a, b) { return total[b] - total[a] || (a < b ? -1 : 1); }).slice(0, TOP);
    var series = top.map(function (n) {
      return {name: n, values: points.map(function (p) {
        var t = (p.tenants || []).find(function (x) { return x.name === n; });
        return t ? t[field] : (summable ? 0 : undefined);
      })};
    });
    if (summable) {
      var others = points.map(function (p) {
        return (p.tenants || []).reduce(function (s, t) { return top.indexOf(t.name) < 0 ? s + t[field] : s; }, 0);
      });
      if (others.some(function (v) { return v > 0; })) { series.push({name: "(others)", values: others}); }
    }
    return series;
  }

  function headline() {
    var box = $("headline");
    var p = points[points.length - 1];
    box.replaceChildren();
    if (!p) { return; }
    var tile = function (k, v, warn) {
      var d = document.createElement("div");
      d.className = "tile" + (warn ? " warn" : "");
      var vv = document.createElement("div"); vv.className = "v"; vv.textContent = v;
      var kk = document.createElement("div"); kk.className = "k"; kk.textContent = k;
      d.appendChild(vv); d.appendChild(kk);
      box.appendChild(d);
    };
    var pressure = Math.max(p.pressure_cpu, p.pressure_memory);
    tile("answers", fmt.rate(p.node.answers_per_s));
    tile("refusals", fmt.rate(p.node.refusals_per_s), p.node.refusals_per_s > 0);
    tile("latency p99", fmt.ms(p.node.p99_ms));
    tile("host pressure", fmt.pct(pressure), pressure >= 0.9);
    tile("memory admitted", fmt.bytes(p.memory_admitted_bytes) + " of " + fmt.bytes(p.memory_limit_bytes));
    tile("tenants with traffic", String((p.tenants || []).filter(function (t) { return t.name !== "(others)"; }).length));
  }

  function draw(intervalMs) {
    headline();
    var plots = [
      {id: "plot-outcomes", title: "Answers by outcome", f: fmt.rate, s: byKeys(function (p) { return p.outcomes_per_s; })},
      {id: "plot-refusals", title: "Refusals by reason", f: fmt.rate, s: byKeys(function (p) { return p.refusals_per_s; })},
      {id: "plot-latency", title: "Latency and queue wait", f: fmt.ms, s: [
        line("p50", function (p) { return p.node.p50_ms; }), line("p99", function (p) { return p.node.p99_ms; }),
        line("queue p50", function (p) { return p.queue_p50_ms; }), line("queue p99", function (p) { return p.queue_p99_ms; })]},
      {id: "plot-tenants", title: "Requests by tenant", f: fmt.rate, s: tenantSeries("answers_per_s", true)},
      {id: "plot-tenant-p99", title: "Latency p99 by tenant", f: fmt.ms, s: tenantSeries("p99_ms", false)},
      {id: "plot-fuel", title: "Fuel", f: fmt.rate, s: [line("fuel", function (p) { return p.node.fuel_per_s; })]},
      {id: "plot-memory", title: "Memory admitted and its limit", f: fmt.bytes, s: [
        line("admitted", function (p) { return p.memory_admitted_bytes; }), line("limit", function (p) { return p.memory_limit_bytes; })]},
      {id: "plot-activations", title: "Activations and warm instances", f: fmt.count, s: [
        line("running", function (p) { return p.live; }), line("queued", function (p) { return p.queued; }),
        line("warm idle", function (p) { return p.warm_idle; })]},
      {id: "plot-ingress", title: "Ingress pools (requests held)", f: fmt.count, s: [
        line("data", function (p) { return p.ingress_data_slots; }), line("control", function (p) { return p.ingress_control_slots; })]},
      {id: "plot-pressure", title: "Host pressure", f: fmt.pct, s: [
        line("cpu", function (p) { return p.pressure_cpu; }), line("memory", function (p) { return p.pressure_memory; })]}
    ];
    var box = $("plots");
    var frag = document.createDocumentFragment();
    plots.forEach(function (pl) { frag.appendChild(figure(pl, intervalMs)); });
    box.replaceChildren(frag);
    plotted++;
    status.dataset.plots = String(plotted);
  }

  function svg(name, attrs, text) {
    var e = document.createElementNS(SVGNS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  // figure is one plot: the series over the window, y from 0 to a round
  // maximum, labelled in the plot's unit, and a legend with each series'
  // latest value; the figure's label says the same for screen readers.
  function figure(pl, intervalMs) {
    var W = 380, H = 150, L = 56, R = 8, T = 8, B = 20;
    var fig = document.createElement("figure");
    fig.id = pl.id;
    fig.tabIndex = 0;
    var cap = document.createElement("figcaption");
    cap.textContent = pl.title;
    fig.appendChild(cap);
    var n = points.length;
    var maxV = 0, withData = 0;
    pl.s.forEach(function (s) { s.values.forEach(function (v) { if (v !== undefined && v > maxV) { maxV = v; } }); });
    points.forEach(function (_, i) {
      if (pl.s.some(function (s) { return s.values[i] !== undefined; })) { withData++; }
    });
    fig.dataset.points = String(withData);
    var top = pl.f === fmt.bytes ? Math.pow(2, Math.ceil(Math.log2(Math.max(maxV, 1)))) : niceMax(maxV);
    var plot = svg("svg", {"class": "plot", viewBox: "0 0 " + W + " " + H, role: "img", "aria-hidden": "true"});
    // The newest point is at the right edge, the window's oldest at the left.
    var x = function (i) { return L + (MAX_POINTS - n + i) / (MAX_POINTS - 1) * (W - L - R); };
    var y = function (v) { return T + (H - T - B) * (1 - (top ? v / top : 0)); };
    [0, 0.5, 1].forEach(function (f) {
      var yy = y(top * f);
      plot.appendChild(svg("line", {"class": "grid", x1: L, x2: W - R, y1: yy, y2: yy}));
      plot.appendChild(svg("text", {x: L - 4, y: yy + 3, "text-anchor": "end"}, pl.f(top * f)));
    });
    var minutes = Math.round(MAX_POINTS * intervalMs / 60000);
    plot.appendChild(svg("text", {x: L, y: H - 5}, "−" + minutes + " min"));
    plot.appendChild(svg("text", {x: W - R, y: H - 5, "text-anchor": "end"}, "now"));
    var legend = document.createElement("ul");
    legend.className = "legend";
    var summary = [];
    pl.s.forEach(function (s, k) {
      var colour = COLOURS[k % COLOURS.length], dash = DASHES[k % DASHES.length];
      var d = "", pen = false;
      s.values.forEach(function (v, i) {
        if (v === undefined) { pen = false; return; }
        d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1);
        pen = true;
      });
      if (d) { plot.appendChild(svg("path", {"class": "series", d: d, stroke: colour, "stroke-dasharray": dash})); }
      var last = s.values[s.values.length - 1];
      if (last !== undefined) { // the latest point as a dot: visible while it is the only one
        plot.appendChild(svg("circle", {"class": "point", cx: x(s.values.length - 1).toFixed(1), cy: y(last).toFixed(1), r: 2.5, fill: colour}));
      }
      var li = document.createElement("li");
      var sw = document.createElement("span");
      sw.className = "swatch" + (dash ? (dash === DASHES[1] ? " dash1" : " dash2") : "");
      sw.style.borderTopColor = colour;
      li.appendChild(sw);
      li.appendChild(document.createTextNode(s.name + " " + (last === undefined ? "–" : pl.f(last))));
      legend.appendChild(li);
      summary.push(s.name + " " + (last === undefined ? "none" : pl.f(last)));
    });
    fig.setAttribute("aria-label", pl.title + ", now: " + (summary.length ? summary.join(", ") : "no data"));
    fig.appendChild(plot);
    if (!pl.s.length) {
      var e = document.createElement("p");
      e.className = "empty";
      e.textContent = "nothing in the last " + minutes + " minutes";
      fig.appendChild(e);
    }
    fig.appendChild(legend);
    return fig;
  }

  // niceMax is the smallest 1, 2 or 5 × 10^k ≥ v: the plot's top.
  function niceMax(v) {
    if (!(v > 0)) { return 1; }
    var e = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (steps[i] * e >= v) { return steps[i] * e; } }
    return 10 * e;
  }

  var saved = sessionStorage.getItem(KEY);
  if (saved) {
    key = saved;
    session().then(function () { return api("/ui/data"); }).then(function (d) { fillTables(d); start(); }).catch(function (e) {
      sessionStorage.removeItem(KEY);
      showSignIn(e instanceof AuthError ? "The saved key was refused (" + e.message + "). Sign in again." : "The node did not answer: " + e.message);
    });
  } else {
    showSignIn("");
  }
})();
