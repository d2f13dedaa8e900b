// webtier dashboard: polls the JSON API and draws uPlot charts. No framework,
// no inline script (the page's CSP forbids it). Each panel shows
// "Redis unreachable" while its API answers 503, and keeps polling.
"use strict";

const BASE = document.body.dataset.base;
const ACTIONS = document.body.dataset.actions === "on";
const state = { precision: 1, names: [], offset: 0, context: null, hours: 1, by: "mean" };
const charts = {};
// A chart follows its element's width (the window resized): uPlot's is fixed.
const resized = new ResizeObserver((entries) => {
  for (const entry of entries) {
    const chart = charts[entry.target.id];
    if (chart) chart.setSize({ width: Math.max(entry.target.clientWidth, 300), height: 220 });
  }
});

const $ = (id) => document.getElementById(id);
const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toPrecision(digits));
const ms = (seconds) => (seconds === null || seconds === undefined ? "–" : `${(seconds * 1000).toFixed(1)} ms`);
const age = (s) => (s === null || s === undefined ? "–" : s < 120 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`);

class Unreachable extends Error {}

async function api(path, params = {}) {
  const url = new URL(`api/${path}`, BASE);
  for (const [key, value] of Object.entries(params)) {
    for (const v of [].concat(value)) url.searchParams.append(key, v);
  }
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (response.status === 503) throw new Unreachable(body.error || "Redis unreachable");
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

// Runs `load` for some panels now and every `every()` seconds; a failure is
// shown on each of them, never thrown.
function poll(panelIds, load, every) {
  const panels = panelIds.map($);
  let timer = null;
  async function tick() {
    clearTimeout(timer);
    let problem = "";
    let unreachable = false;
    try {
      await load();
    } catch (error) {
      unreachable = error instanceof Unreachable;
      problem = unreachable ? "Redis unreachable" : String(error.message || error);
    }
    for (const panel of panels) {
      panel.querySelector(".status").textContent = problem;
      panel.classList.toggle("unreachable", unreachable);
    }
    timer = setTimeout(tick, every() * 1000);
  }
  tick();
  return tick;
}

// One chart per element, rebuilt when its series change, else fed new data,
// under its `title`. A lone point gets `pad` seconds either side (a
// zero-width range has no axis). No point at all draws no chart but says
// why (`empty`): an empty series would put the time axis at the epoch, 1970.
// data-points, data-last, data-xmin and data-xmax (the time axis) tell tests.
function draw(id, labels, data, { title = "", empty = "no data", units = "", pad = 30 } = {}) {
  const element = $(id);
  const count = data[0].length;
  element.dataset.points = String(count);
  element.dataset.last = count ? String(data[0][count - 1]) : "";
  let chart = charts[id];
  if (chart && (chart.key !== labels.join("\u0000") || chart.title !== title || !count)) {
    chart.destroy();
    chart = null;
    delete charts[id];
  }
  if (!count) {
    const note = document.createElement("p");
    note.className = "empty";
    note.textContent = `${title ? `${title}: ` : ""}${empty}`;
    element.replaceChildren(note);
    element.dataset.xmin = element.dataset.xmax = "";
    return;
  }
  if (!chart) {
    element.replaceChildren();
    const palette = ["#2364aa", "#e07a1f", "#3da35d", "#c8293d", "#7d4fb3", "#1fa0a8", "#8a6d3b"];
    const options = {
      title,
      width: Math.max(element.clientWidth, 300),
      height: 220,
      scales: { x: { time: true, range: (u, min, max) => (min === max ? [min - pad, max + pad] : [min, max]) } },
      series: [{}, ...labels.map((label, i) => ({ label, stroke: palette[i % palette.length], width: 1.5 }))],
      axes: [{}, { size: 60, values: (u, vals) => vals.map((v) => `${v}${units}`) }],
      legend: { live: false },
      hooks: {
        setScale: [(u, key) => {
          if (key === "x") Object.assign(element.dataset, { xmin: u.scales.x.min, xmax: u.scales.x.max });
        }],
      },
    };
    chart = new uPlot(options, data, element);
    resized.observe(element);
    chart.key = labels.join("\u0000");
    chart.title = title;
    charts[id] = chart;
  } else {
    chart.setData(data, count > 1);
  }
  // uPlot spans a lone point over 1,000 days, whatever the range function says.
  if (count === 1) chart.setScale("x", { min: data[0][0] - pad, max: data[0][0] + pad });
}

// Aligns {name: [[start, count], ...]} on one time axis (missing slices: 0).
function aligned(series, names) {
  const times = [...new Set(names.flatMap((n) => (series[n] || []).map((s) => s[0])))].sort((a, b) => a - b);
  const columns = names.map((n) => {
    const byTime = new Map(series[n] || []);
    return times.map((t) => byTime.get(t) || 0);
  });
  return [times, ...columns];
}

// -- counters ------------------------------------------------------------------------

async function loadCounterNames(append = false) {
  const page = await api("counters", { precision: state.precision, offset: state.offset, limit: 100, prefix: $("prefix").value });
  const select = $("counter-names");
  if (!append) select.replaceChildren();
  for (const counter of page.counters) {
    // The count beside a name is its latest slice's: say so.
    const option = new Option(`${counter.name} \u00b7 ${counter.latest} per ${state.precision} s`, counter.name);
    option.title = `${counter.name}: ${counter.latest} in its latest ${state.precision} s slice`;
    option.selected = state.names.includes(counter.name);
    select.add(option);
  }
  $("counter-total").textContent = `${select.options.length} of ${page.total} counters`;
  $("more").disabled = select.options.length >= page.total;
  if (!state.names.length && page.counters.length) {
    state.names = [page.counters[0].name];
    select.options[0].selected = true;
  }
}

async function loadCounterChart() {
  if (!state.names.length) await loadCounterNames();
  const title = `count per ${state.precision} s`;
  if (!state.names.length) {
    const why = $("prefix").value ? "no counter has this prefix" : "no counter yet (tier.counters.record(name) makes one)";
    draw("counter-chart", [], [[]], { title, empty: why });
    return;
  }
  const body = await api("series", { name: state.names, precision: state.precision });
  draw("counter-chart", state.names, aligned(body.series, state.names), {
    title, empty: `no count in the slices kept at ${state.precision} s precision`,
  });
}

// -- page cache, sessions, rows, workers, items ------------------------------------------

// Figures, each [label, value, what it counts (a tooltip)].
function figures(id, triples) {
  $(id).replaceChildren(...triples.map(([label, value, tip]) => {
    const span = document.createElement("span");
    const b = document.createElement("b");
    b.textContent = value;
    span.append(b, label);
    span.title = tip;
    return span;
  }));
}

// Table rows, one per record; none: one row saying why (`empty`). Columns
// in `wrap` may wrap (long text), so the table fits its panel.
function rows(id, records, cells, { empty = "none", wrap = [] } = {}) {
  const body = $(id);
  if (!records.length) {
    const td = document.createElement("td");
    td.className = "empty";
    td.colSpan = body.closest("table").querySelectorAll("thead th").length || 1;
    td.textContent = empty;
    const tr = document.createElement("tr");
    tr.append(td);
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...records.map((record) => {
    const tr = document.createElement("tr");
    cells(record).forEach((cell, i) => {
      const td = document.createElement("td");
      if (wrap.includes(i)) td.className = "wrap";
      if (cell instanceof Node) td.append(cell);
      else td.textContent = cell;
      tr.append(td);
    });
    return tr;
  }));
}

async function purge(body) {
  const csrf = document.cookie.split("; ").find((c) => c.startsWith("webtier_dashboard_csrf="));
  const response = await fetch(new URL("api/actions/purge", BASE), {
    method: "POST",
    headers: { "Content-Type": "application/json", "x-csrftoken": csrf ? csrf.split("=")[1] : "" },
    body: JSON.stringify(body),
  });
  if (!response.ok) alert(`purge failed: HTTP ${response.status}`);
}

async function loadHealth() {
  const health = await api("health", { precision: Math.max(state.precision, 5) });
  const every = health.precision;
  const cache = health.pagecache;
  const outcomes = ["hit", "miss", "stale", "render"];
  const total = (name) => cache[name].reduce((sum, s) => sum + s[1], 0);
  const served = total("hit") + total("miss") + total("stale");
  const told = {
    hit: ["hits", "answered from the cache"],
    miss: ["misses", "rendered by the app, then stored"],
    stale: ["stale", "answered from an expired copy while one worker renders"],
    render: ["renders", "renders the cache asked the app for"],
  };
  const kept = `in the ${every} s slices kept`;
  figures("pagecache-figures", [
    ...outcomes.map((name) => [told[name][0], total(name), `${told[name][1]}, ${kept}`]),
    ["hit ratio", served ? `${((100 * (total("hit") + total("stale"))) / served).toFixed(1)} %` : "–", `(hits + stale) / answers, ${kept}`],
  ]);
  draw("pagecache-chart", outcomes, aligned(cache, outcomes), {
    title: `page cache answers per ${every} s`,
    empty: "no page served through the page cache yet",
  });

  const sessions = health.sessions;
  figures("sessions-figures", [
    ["sessions", sessions.count, "live sessions now"],
    ["cap", sessions.limit, "the most sessions kept: the cleaner removes the oldest over it"],
    ["busiest shard", sessions.busiest_shard, "sessions in the fullest of the sessions' shards"],
    ["oldest", age(sessions.oldest_age), "since the least recently seen session was last seen"],
  ]);
  const meter = $("sessions-meter");
  meter.value = sessions.limit ? sessions.count / sessions.limit : 0;
  meter.title = `${sessions.count} sessions of the cap of ${sessions.limit}`;
  draw("cleaner-chart", ["removed"], aligned({ c: sessions.cleaned }, ["c"]), {
    title: `sessions removed per ${every} s`,
    empty: "the cleaner has removed no session in the slices kept (it removes sessions over the cap or idle; `webtier worker` runs it)",
  });

  rows("row-rows", health.rows, (r) => [r.source, r.scheduled, r.due, r.loading, age(r.lag)], {
    empty: "no row source configured (RowSettings.sources)",
  });
  rows("worker-rows", health.workers, (w) => [
    `${w.id} (pid ${w.pid})`,
    w.jobs.join(", "),
    w.last_job ? `${w.last_job} ${age(w.last_age)} ago: ${w.last_outcome || "idle"}` : "–",
    `${age(w.beat_age)} ago`,
    age(w.up),
  ], { empty: "no worker alive (start one: webtier worker)", wrap: [0, 1, 2] });
  rows("item-rows", health.top_items, (i) => {
    const cells = [i.item, Number.isInteger(i.views) ? i.views : i.views.toFixed(1)];
    if (ACTIONS) {
      const button = document.createElement("button");
      button.textContent = "purge pages";
      button.addEventListener("click", () => purge({ item: i.item }));
      cells.push(button);
    }
    return cells;
  }, { empty: "no item viewed yet (tier.ranking.record_view)" });
}

// -- statistics and the slowest pages ---------------------------------------------------

function contextLink(context) {
  const a = document.createElement("a");
  a.className = "context";
  a.href = `#context=${encodeURIComponent(context)}`;
  a.textContent = context;
  return a;
}

async function loadStats() {
  const body = await api("stats", { hours: state.hours, by: state.by, limit: 50 });
  const hours = `the last ${state.hours} h`;
  rows("stats-rows", body.contexts, (s) => [contextLink(s.context), s.count, ms(s.mean), ms(s.stddev), ms(s.p50), ms(s.p95), ms(s.p99), s.errors], {
    empty: `no request timed in ${hours} (the timing middleware or tier.stats.access_time record them)`,
    wrap: [0],
  });
  const list = $("slowest-list");
  list.replaceChildren(...body.contexts.slice(0, 10).map((s) => {
    const li = document.createElement("li");
    li.append(contextLink(s.context), ` ${ms(s[state.by])}`);
    li.title = `${state.by} AccessTime over ${hours}`;
    return li;
  }));
  if (!state.context && body.contexts.length) state.context = body.contexts[0].context;
  if (state.context) await loadContext();
  else draw("context-chart", [], [[]], { title: "AccessTime", empty: `no page timed in ${hours}` });
}

async function loadContext() {
  const body = await api(`stats/${encodeURIComponent(state.context)}`, { hours: Math.max(state.hours, 6) });
  $("context-title").textContent = `${body.context}: per ${body.period / 60} min`;
  // Every period of the window, those without requests as gaps: the axis
  // spans the hours asked for even while only the current one has data.
  const points = body.points;
  const seconds = (key) => points.map((p) => (p.count && p[key] !== null ? p[key] * 1000 : null));
  draw("context-chart", ["mean", "p95", "p99"], [points.map((p) => p.start), seconds("mean"), seconds("p95"), seconds("p99")], {
    title: `AccessTime per ${body.period / 60} min`, units: " ms", pad: body.period, empty: "no request in the window",
  });
}

// -- wiring ---------------------------------------------------------------------------

function followHash() {
  const match = /context=([^&]+)/.exec(location.hash);
  if (match) state.context = decodeURIComponent(match[1]);
}

async function start() {
  const settings = await api("settings");
  const precision = $("precision");
  for (const seconds of settings.precisions) precision.add(new Option(`${seconds} s`, seconds));
  state.precision = settings.precisions[0];
  $("hours").max = settings.stats_hours;
  followHash();

  const counters = poll(["counters"], loadCounterChart, () => Math.min(state.precision, 10));
  const stats = poll(["stats", "slowest"], loadStats, () => 5);
  poll(["pagecache", "sessions", "rows", "workers", "items"], loadHealth, () => 2);

  precision.addEventListener("change", () => {
    state.precision = Number(precision.value);
    state.offset = 0;
    loadCounterNames().then(counters, counters);
  });
  $("counter-names").addEventListener("change", (event) => {
    state.names = [...event.target.selectedOptions].map((o) => o.value).slice(0, 20);
    counters();
  });
  $("prefix").addEventListener("input", () => {
    state.offset = 0;
    state.names = [];
    loadCounterNames().then(counters, counters);
  });
  $("more").addEventListener("click", () => {
    state.offset = $("counter-names").options.length;
    loadCounterNames(true);
  });
  $("hours").addEventListener("change", (e) => { state.hours = Number(e.target.value) || 1; stats(); });
  $("by").addEventListener("change", (e) => { state.by = e.target.value; stats(); });
  window.addEventListener("hashchange", () => { followHash(); stats(); });
}

document.addEventListener("DOMContentLoaded", () => {
  start().catch((error) => {
    for (const status of document.querySelectorAll(".status")) status.textContent = String(error.message || error);
  });
});
