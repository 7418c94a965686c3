#include "server/dashboard_page.h"

namespace aq::server {

// The page's data: /dashboard.json = {"stats": /stats, "history": {"t": [...],
// "node.get": [...], ...}, "cluster": null | {"node", "members": [...]},
// "time"}. Everything shown is computed from that in the browser.
const char kDashboardPage[] = R"AQDASH(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>aquifer dashboard</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>
*{box-sizing:border-box}
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;background:#f4f6f9;color:#1c2430}
header{background:#14213d;color:#fff;padding:12px 20px;display:flex;flex-wrap:wrap;gap:6px 18px;align-items:baseline}
header h1{font-size:18px;margin:0}
header .meta{color:#c9d2e3;font-size:13px}
#conn{margin-left:auto;font-size:13px;padding:2px 10px;border-radius:10px;background:#2a9d8f}
#conn.bad{background:#d62828}
main{padding:14px;display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,460px),1fr));gap:14px}
section{background:#fff;border:1px solid #dde3ea;border-radius:8px;padding:12px 14px;min-width:0}
section.wide{grid-column:1/-1}
h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 6px;border-bottom:1px solid #eef1f5;vertical-align:top;overflow-wrap:anywhere}
th{background:#f0f3f7;font-weight:600}
.tablewrap{overflow-x:auto}
.tablewrap table{min-width:780px}
.tablewrap th,.tablewrap td{white-space:nowrap;overflow-wrap:normal}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;white-space:nowrap}
.ok{background:#d8f3dc;color:#1b4332}.warn{background:#ffe8cc;color:#7f4f00}.bad{background:#ffd6d6;color:#8a0000}
.off{background:#e9ecef;color:#495057}
.badge.long{white-space:normal;overflow-wrap:anywhere}
section div{overflow-wrap:anywhere}
.figs{display:flex;flex-wrap:wrap;gap:8px;margin-bottom:8px}
.fig{background:#f0f3f7;border-radius:6px;padding:6px 10px;min-width:110px}
.fig b{display:block;font-size:18px}.fig span{font-size:12px;color:#55606e}
.bar{height:10px;background:#e9ecef;border-radius:5px;overflow:hidden;margin:3px 0 6px}
.bar i{display:block;height:100%;background:#3a86ff}
.bar i.hot{background:#e76f51}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,420px),1fr));gap:12px}
svg.chart{width:100%;height:auto;display:block}
svg text{font:11px system-ui,sans-serif;fill:#444}
svg .title{font-weight:600;font-size:12px;fill:#1c2430}
ul.log{list-style:none;margin:0;padding:0;max-height:220px;overflow-y:auto;font-size:13px}
ul.log li{padding:3px 0;border-bottom:1px solid #eef1f5}
ul.log time{color:#55606e;margin-right:8px;font-variant-numeric:tabular-nums}
.muted{color:#6c757d}
</style></head>
<body>
<header><h1>aquifer</h1><span class="meta" id="who">connecting…</span><span class="meta" id="updated"></span>
<span id="conn">live</span></header>
<main>
<section class="wide" id="nodes-card"><h2>Nodes</h2><div class="tablewrap"><table id="nodes"></table></div></section>
<section id="protection-card"><h2>Protection</h2><div id="protection"></div></section>
<section id="pools-card"><h2>Pools on this node</h2><div id="pools"></div></section>
<section id="activity-card"><h2>Scrub, repair, tiering, staging</h2><div id="activity"></div></section>
<section id="log-card"><h2>What changed (since this page opened)</h2><ul class="log" id="log"></ul></section>
<section class="wide"><h2>The last minutes on this node</h2><div class="charts" id="charts"></div></section>
</main>
<script>
"use strict";
const $ = id => document.getElementById(id);
const esc = s => String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
function fmtNum(v, digits) {
  if (!isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  if (a > 0 && a < 0.01 && digits === undefined) return v.toPrecision(2);
  return v.toFixed(digits === undefined ? (a >= 100 ? 0 : a >= 10 ? 1 : 2) : digits);
}
function fmtBytes(b) {
  if (!isFinite(b) || b < 0) return "–";
  const u = ["B", "kB", "MB", "GB", "TB", "PB"];
  let i = 0;
  while (b >= 1000 && i < u.length - 1) { b /= 1000; i++; }
  return (i === 0 ? b.toFixed(0) : b.toFixed(b >= 100 ? 0 : 1)) + " " + u[i];
}
function fmtAgo(s) {
  if (!isFinite(s) || s < 0) return "never";
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  return (s / 3600).toFixed(1) + " h ago";
}
const num = (o, k) => (o && typeof o[k] === "number" && isFinite(o[k])) ? o[k] : 0;
// The cluster's repair and tiering work: every member runs its share and
// publishes its counters (every 2 s); counters add up, backlogs are the
// largest any member reports. Without them, this node's own.
function repairOf(d) {
  const own = ((d.stats || {}).cluster || {}).repair || {};
  const members = ((d.cluster || {}).members || []).filter(m => m.status && m.status.repair && m.up);
  if (!members.length) return own;
  const r = {last_error: own.last_error, last_pass_seconds: num(own, "last_pass_seconds"), blocks: num(own, "blocks")};
  for (const k of ["passes", "copied", "bytes_copied", "reprotected", "tiered", "bytes_tiered"])
    r[k] = members.reduce((a, m) => a + num(m.status.repair, k), 0);
  for (const k of ["under_protected", "misplaced", "tier_misplaced", "tier_blocked"])
    r[k] = Math.max(num(own, k), ...members.map(m => num(m.status.repair, k)));
  return r;
}

// ---- the log of changes, from one poll to the next
let prev = null;
const logged = [];
function note(kind, text) {
  const t = new Date();
  logged.unshift({kind, text, t});
  if (logged.length > 200) logged.pop();
  $("log").innerHTML = logged.map(e =>
    `<li data-kind="${esc(e.kind)}"><time>${e.t.toLocaleTimeString()}</time>${esc(e.text)}</li>`).join("");
}
const active = {};
function track(kind, now, before, started, ended) {
  const a = active[kind] || (active[kind] = {on: false, from: 0, quiet: 0});
  if (now > before) {
    if (!a.on) { a.on = true; a.from = before; note(kind, started(now - before)); }
    a.quiet = 0;
  } else if (a.on && ++a.quiet >= 3) {  // three quiet polls: done
    a.on = false; note(kind, ended(now - a.from));
  }
}
function health(m) {
  if (m.state === "removed") return ["removed", "off"];
  if (!m.up && !m.answers) return ["down", "bad"];
  if (!m.answers) return ["down (not answering)", "bad"];
  if (!m.up) return ["down (lease expired)", "bad"];
  if (m.state === "smartfail") return ["smartfailing", "warn"];
  return ["up", "ok"];
}
function diff(d) {
  const s = d.stats || {}, r = repairOf(d), sc = s.scrub || {};
  if (prev) {
    const ps = prev.stats || {}, pr = repairOf(prev), psc = ps.scrub || {};
    const before = {};
    for (const m of ((prev.cluster || {}).members || [])) before[m.id] = health(m)[0];
    for (const m of ((d.cluster || {}).members || [])) {
      const h = health(m)[0];
      if (before[m.id] === undefined) note("member", `node ${m.id} (${m.address}) joined: ${h}`);
      else if (before[m.id] !== h) note(h.startsWith("down") ? "down" : "member", `node ${m.id} (${m.address}): ${before[m.id]} → ${h}`);
    }
    // Work that runs for a while is logged when it starts and when it ends,
    // not every second in between.
    track("repair", num(r, "copied") + num(r, "reprotected"), num(pr, "copied") + num(pr, "reprotected"),
          n => `repair started: copying blocks to restore protection`,
          n => `repair done: ${n} block(s) copied or re-protected`);
    track("tiering", num(r, "tiered"), num(pr, "tiered"), n => "tiering started: moving blocks between pools",
          n => `tiering done: ${n} block(s) moved`);
    track("staging", num(s.staging, "staged"), num(ps.staging, "staged"),
          n => "staging started: reading blocks ahead for a training plan", n => `staging done: ${n} block(s) staged`);
    if (num(r, "under_protected") > 0 && num(pr, "under_protected") === 0)
      note("repair", `${num(r, "under_protected")} block(s) under-protected`);
    if (num(r, "under_protected") === 0 && num(pr, "under_protected") > 0) note("repair", "every block protected again");
    const corrupt = num(sc, "corrupt") - num(psc, "corrupt"), missing = num(sc, "missing") - num(psc, "missing");
    if (corrupt > 0 || missing > 0) note("scrub", `scrub found ${corrupt} damaged and ${missing} missing piece(s)`);
    if (sc.running && !psc.running) note("scrub", "scrub pass started");
    if (!sc.running && psc.running) note("scrub", "scrub pass ended");
  }
  prev = d;
}

// ---- tables and panels
function renderNodes(d) {
  const s = d.stats || {}, members = (d.cluster || {}).members, self = (d.cluster || {}).node || location.host;
  let rows = "<tr><th>node</th><th>address</th><th>health</th><th>state</th><th>pools</th><th>capacity</th>" +
             "<th>GET/s</th><th>out</th><th>cache hits</th><th>scrub</th></tr>";
  if (!members) {
    const pools = (s.pools || []).map(p => `${esc(p.name)} (${esc(p.media || "?")})`).join(", ");
    const size = (s.pools || []).reduce((a, p) => a + num(p, "size_bytes"), 0);
    rows += `<tr data-node="this" data-health="up"><td>this node (single)</td><td>${esc(self)}</td>` +
            `<td><span class="badge ok">up</span></td><td>active</td><td>${pools}</td><td>${fmtBytes(size)}</td>` +
            `<td>${fmtNum(last(d, "node.get"))}</td><td>${fmtBytes(last(d, "node.out") * 1e6)}/s</td>` +
            `<td>${fmtNum(100 * num(s.cache, "hit_ratio"), 1)}%</td><td>${scrubCell(s.scrub)}</td></tr>`;
  } else {
    for (const m of members) {
      const [h, cls] = health(m), st = m.status || {};
      const hits = num(st, "cache_hits"), misses = num(st, "cache_misses");
      const pools = (m.pools || []).map(p => `${esc(p.name)} (${esc(p.media || "?")})`).join(", ");
      rows += `<tr data-node="${esc(m.id)}" data-health="${h.startsWith("down") ? "down" : esc(h)}">` +
              `<td>${esc(m.id)}${m.self ? " <span class=\"muted\">(this)</span>" : ""}</td><td>${esc(m.address)}</td>` +
              `<td><span class="badge ${cls}">${esc(h)}</span></td><td>${esc(m.state)}</td><td>${pools}</td>` +
              `<td>${fmtBytes(num(m, "capacity_bytes"))}</td>` +
              `<td>${h === "up" ? fmtNum(num(st, "get_per_second")) : "–"}</td><td>${fmtBytes(num(st, "bytes_out"))} sent</td>` +
              `<td>${hits + misses > 0 ? fmtNum(100 * hits / (hits + misses), 1) + "%" : "–"}</td><td>${scrubCell(st.scrub)}</td></tr>`;
    }
  }
  $("nodes").innerHTML = rows;
}
function scrubCell(sc) {
  if (!sc) return "–";
  const bad = num(sc, "unrepaired") + num(sc, "objects_at_risk");
  const cls = bad > 0 ? "bad" : num(sc, "corrupt") + num(sc, "missing") > 0 ? "warn" : "ok";
  return `<span class="badge ${cls}">${fmtNum(num(sc, "pieces_verified"), 0)} verified, ${fmtNum(num(sc, "corrupt"), 0)} damaged, ${fmtNum(num(sc, "repaired"), 0)} rebuilt</span>`;
}
function renderProtection(d) {
  const s = d.stats || {}, c = s.cluster, sc = s.scrub || {};
  const atRisk = (sc.objects_at_risk || []);
  let state, cls, text;
  const r = c ? repairOf(d) : null;
  if (atRisk.length > 0 || num(sc, "unrepaired") > 0) {
    state = "at-risk"; cls = "bad"; text = `${atRisk.length} object(s) at risk`;
  } else if (r && (num(r, "under_protected") > 0)) {
    state = "under-protected"; cls = "warn"; text = `${num(r, "under_protected")} block(s) under-protected: repair is working on it`;
  } else if (r && num(r, "passes") === 0) {
    state = "unknown"; cls = "off"; text = "no repair pass yet";
  } else {
    state = "protected"; cls = "ok"; text = c ? "every block fully protected" : "single node: no copies to check";
  }
  let h = `<div data-state="${state}"><span class="badge ${cls}">${esc(text)}</span></div><div class="figs" style="margin-top:8px">`;
  if (c) {
    h += fig(esc(c.policy || ("replicas:" + c.replicas)), "cluster protection") +
         fig(fmtNum(num(r, "blocks"), 0), "blocks (this node's last pass)") +
         fig(fmtNum(num(r, "misplaced"), 0), "misplaced") +
         fig(fmtNum(num(r, "tier_misplaced"), 0), "on the wrong tier") +
         fig(num(r, "last_pass_seconds").toFixed(2) + " s", "last repair pass");
  }
  h += fig(fmtNum(num(sc, "quarantined"), 0), "quarantined pieces") + "</div>";
  if (atRisk.length) h += "<div>At risk:</div><ul>" + atRisk.slice(0, 10).map(o => `<li>${esc(o)}</li>`).join("") + "</ul>";
  if (c && c.bucket_policies && Object.keys(c.bucket_policies).length)
    h += "<div class=\"muted\">buckets: " + Object.entries(c.bucket_policies).map(([b, p]) => `${esc(b)} ${esc(p)}`).join(", ") + "</div>";
  $("protection").innerHTML = h;
}
const fig = (v, label) => `<div class="fig"><b>${v}</b><span>${esc(label)}</span></div>`;
function renderPools(d) {
  const pools = (d.stats || {}).pools || [];
  if (!pools.length) { $("pools").innerHTML = "<div class=\"muted\">no pools</div>"; return; }
  $("pools").innerHTML = pools.map(p => {
    const size = num(p, "size_bytes"), avail = num(p, "available_bytes");
    const used = size > 0 ? (size - avail) / size : 0;
    return `<div data-pool="${esc(p.name)}"><b>${esc(p.name)}</b> <span class="badge off">${esc(p.media || "?")}</span> ` +
           `${fmtBytes(num(p, "bytes"))} in ${fmtNum(num(p, "blocks"), 0)} blocks` +
           (p.compression && p.compression !== "none" || num(p, "compressed_blocks") > 0
              ? ` holding ${fmtBytes(num(p, "logical_bytes"))} (${esc(p.compression || "none")}: ` +
                `${fmtNum(num(p, "ratio"), 2)}x stored)` : "") +
           (size > 0 ? `; its file system ${fmtNum(100 * used, 0)}% used (${fmtBytes(avail)} free of ${fmtBytes(size)})` : "") +
           `<div class="bar"><i class="${used > 0.9 ? "hot" : ""}" style="width:${Math.min(100, 100 * used).toFixed(1)}%"></i></div></div>`;
  }).join("");
}
function renderActivity(d) {
  const s = d.stats || {}, sc = s.scrub || {}, st = s.staging || {}, r = repairOf(d), up = s.uploads || {};
  let h = "";
  const inPass = num(sc, "pieces_in_pass"), done = num(sc, "pieces_done_in_pass");
  h += `<div data-activity="scrub"><b>Scrub</b> ` + (sc.enabled === false ? "off" : sc.running ?
       `running: ${fmtNum(done, 0)} of ${fmtNum(inPass, 0)} pieces` :
       `idle; last pass ${fmtAgo(num(sc, "last_pass_ended_seconds_ago"))}, ${fmtNum(num(sc, "passes"), 0)} pass(es)`) +
       (sc.running ? `<div class="bar"><i style="width:${inPass > 0 ? (100 * done / inPass).toFixed(1) : 0}%"></i></div>` : "") +
       "</div>";
  if (s.cluster) {
    h += `<div data-activity="repair"><b>Repair</b> ${fmtNum(num(r, "passes"), 0)} passes; ${fmtNum(num(r, "copied"), 0)} copies made ` +
         `(${fmtBytes(num(r, "bytes_copied"))}), ${fmtNum(num(r, "reprotected"), 0)} re-protected, ` +
         `${fmtNum(num(r, "under_protected"), 0)} under-protected now` +
         (r.last_error ? ` <span class="badge warn long">last error: ${esc(r.last_error)}</span>` : "") + "</div>";
    h += `<div data-activity="tiering"><b>Tiering</b> ${fmtNum(num(r, "tiered"), 0)} block(s) moved (${fmtBytes(num(r, "bytes_tiered"))}); ` +
         `${fmtNum(num(r, "tier_misplaced"), 0)} waiting to move, ${fmtNum(num(r, "tier_blocked"), 0)} blocked</div>`;
  }
  h += `<div data-activity="staging"><b>Staging</b> ${fmtNum(num(st, "planned"), 0)} planned, ${fmtNum(num(st, "staged"), 0)} staged, ` +
       `${fmtNum(num(st, "hits") + num(st, "late_hits"), 0)} read from stage, ${fmtNum(num(st, "queued"), 0)} queued; ` +
       `${fmtBytes(num(st, "bytes_held"))} held of ${fmtBytes(num(st, "memory_bytes"))}</div>`;
  h += `<div><b>Uploads</b> ${fmtNum(num(up, "in_progress"), 0)} multipart in progress (${fmtBytes(num(up, "part_bytes"))})</div>`;
  $("activity").innerHTML = h;
}

// ---- charts: inline SVG line charts of the history
function last(d, name) {
  const v = ((d.history || {})[name]) || [];
  return v.length ? v[v.length - 1] : 0;
}
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}
const colours = ["#3a86ff", "#e76f51", "#2a9d8f", "#8338ec", "#ffb703", "#6c757d"];
function chart(title, unit, t, lines) {
  const W = 640, H = 220, L = 56, R = 12, T = 26, B = 40;
  const now = t.length ? t[t.length - 1] : 0, span = Math.max(60, Math.min(600, now - (t[0] || 0)));
  let max = 0;
  for (const l of lines) for (const v of l.values) if (isFinite(v)) max = Math.max(max, v);
  max = niceMax(max);
  const x = tt => L + (W - L - R) * (1 - (now - tt) / span), y = v => T + (H - T - B) * (1 - v / max);
  let g = `<text class="title" x="${L}" y="16">${esc(title)} (${esc(unit)})</text>`;
  for (let i = 0; i <= 4; i++) {
    const v = max * i / 4, yy = y(v);
    g += `<line x1="${L}" x2="${W - R}" y1="${yy}" y2="${yy}" stroke="#eef1f5"/>` +
         `<text x="${L - 6}" y="${yy + 4}" text-anchor="end">${fmtNum(v)}</text>`;
  }
  for (const s of [span, span / 2, 0]) {
    g += `<text x="${x(now - s)}" y="${H - B + 16}" text-anchor="${s === span ? "start" : s === 0 ? "end" : "middle"}">` +
         `${s === 0 ? "now" : "-" + Math.round(s) + " s"}</text>`;
  }
  let lx = L;
  lines.forEach((l, i) => {
    const pts = [];
    l.values.forEach((v, k) => { if (isFinite(v) && now - t[k] <= span) pts.push(x(t[k]).toFixed(1) + "," + y(Math.min(v, max)).toFixed(1)); });
    g += `<polyline fill="none" stroke="${colours[i % colours.length]}" stroke-width="1.8" points="${pts.join(" ")}"/>`;
    const label = `${l.name} ${fmtNum(l.values.length ? l.values[l.values.length - 1] : 0)}`;
    g += `<rect x="${lx}" y="${H - 14}" width="10" height="10" fill="${colours[i % colours.length]}"/>` +
         `<text x="${lx + 14}" y="${H - 5}">${esc(label)}</text>`;
    lx += 26 + label.length * 6.2;
  });
  return `<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">${g}</svg>`;
}
function renderCharts(d) {
  const h = d.history || {}, t = h.t || [], v = n => h[n] || [];
  $("charts").innerHTML =
    chart("Throughput", "MB/s", t, [{name: "out", values: v("node.out")}, {name: "in", values: v("node.in")}]) +
    chart("Requests", "per s", t, [{name: "GET", values: v("node.get")}, {name: "PUT", values: v("node.put")},
      {name: "HEAD", values: v("node.head")}, {name: "LIST", values: v("node.list")},
      {name: "errors", values: v("node.errors.server").map((e, i) => e + (v("node.errors.client")[i] || 0))}]) +
    chart("Latency of the requests finished each second", "ms", t, [{name: "GET p50", values: v("node.get.p50_ms")},
      {name: "GET p99", values: v("node.get.p99_ms")}, {name: "PUT p99", values: v("node.put.p99_ms")}]) +
    chart("CPU (whole machine)", "%", t, [{name: "user", values: v("cpu.user")}, {name: "system", values: v("cpu.system")},
      {name: "iowait", values: v("cpu.iowait")}]);
}

// ---- the poll
let failingSince = null;
async function poll() {
  try {
    const res = await fetch("dashboard.json", {cache: "no-store"});
    if (!res.ok) throw new Error("HTTP " + res.status);
    const d = await res.json();
    failingSince = null;
    $("conn").className = ""; $("conn").textContent = "live";
    const c = d.cluster;
    $("who").textContent = c && c.members ? `cluster of ${c.members.length} node(s), seen from ${c.node}` : "single node";
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    diff(d);
    renderNodes(d); renderProtection(d); renderPools(d); renderActivity(d); renderCharts(d);
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  } catch (e) {
    if (!failingSince) { failingSince = new Date(); note("down", "this node stopped answering: " + e.message); }
    $("conn").className = "bad";
    $("conn").textContent = "not answering since " + failingSince.toLocaleTimeString();
  }
  setTimeout(poll, 1000);
}
poll();

// ---- layout self-check, for tests: what a person would see as broken
window.aquiferLayout = function () {
  const problems = [];
  const vw = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > vw + 1) problems.push(`page wider than the window (${document.documentElement.scrollWidth} > ${vw})`);
  for (const svg of document.querySelectorAll("svg.chart")) {
    const box = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll("text")].map(t => [t, t.getBoundingClientRect()]);
    for (const [t, r] of texts) {
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        problems.push(`text outside its chart: "${t.textContent}"`);
    }
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i][1], b = texts[j][1];
      if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
        problems.push(`overlapping texts: "${texts[i][0].textContent}" and "${texts[j][0].textContent}"`);
    }
  }
  const shown = document.body.innerText;
  for (const bad of [/\bNaN\b/, /\bnan\b/, /Infinity/, /\d[eE][+-]\d/, /undefined/, /\[object/])
    if (bad.test(shown)) problems.push("shows " + bad);
  // A table squeezed into a narrow window instead of scrolling: cells a
  // few characters wide, their words broken over many lines.
  for (const td of document.querySelectorAll("td")) {
    const r = td.getBoundingClientRect();
    if (td.textContent.trim().length > 3 && r.height > 60) problems.push(`table cell squeezed: "${td.textContent.trim().slice(0, 30)}"`);
  }
  for (const s of document.querySelectorAll("section")) {
    if (s.scrollWidth > s.clientWidth + 1 && !s.querySelector(".tablewrap")) problems.push(`section overflows: ${s.id || s.querySelector("h2").textContent}`);
  }
  return problems;
};
</script></body></html>
)AQDASH";

}  // namespace aq::server
