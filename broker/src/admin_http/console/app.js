// The Laminar console: plain JavaScript, no build step, no dependencies (decision 0015).
// Every figure comes from this broker's JSON admin API under /v1/ (docs/admin-api.md); text
// from the broker is put on the page with textContent only, never parsed as HTML.
"use strict";

const REFRESH_MS = 2000; // the history's sampling period
let timer = null; // the current page's refresh, if it has one

// ---------------------------------------------------------------- helpers

/** An element: h("td", {class: "num"}, "12", child, ...). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const svgNs = "http://www.w3.org/2000/svg";
function s(tag, attrs) {
  const el = document.createElementNS(svgNs, tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, value);
  return el;
}

// The endpoint may ask for a bearer token (401): asked once, kept for this tab only
// (sessionStorage), sent with every request.
const TOKEN_KEY = "laminar.token";

async function api(method, path, body) {
  let response = await send(method, path, body);
  if (response.status === 401) {
    const token = window.prompt("This Laminar endpoint needs a token (kept for this tab only):");
    if (token) {
      sessionStorage.setItem(TOKEN_KEY, token.trim());
      response = await send(method, path, body);
    }
  }
  const text = await response.text();
  if (response.status === 401) sessionStorage.removeItem(TOKEN_KEY);
  let value = null;
  try { value = JSON.parse(text); } catch (e) { value = { error: text }; }
  if (!response.ok) throw new Error((value && value.error) || `${response.status}`);
  return value;
}

function send(method, path, body) {
  const init = { method, headers: {} };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) init.headers["Authorization"] = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return fetch(path, init);
}

function showError(error) {
  const box = document.getElementById("error");
  box.textContent = String(error.message || error);
  box.hidden = false;
  setTimeout(() => { box.hidden = true; }, 8000);
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}
const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const ms = (n) => (n === null || n === undefined ? "–" : `${Number(n).toFixed(n < 1 ? 3 : 1)} ms`);
const enc = encodeURIComponent;

function table(headers, rows, attrs) {
  return h("table", attrs || {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", { class: x.endsWith(" ") ? "num" : null }, x.trim())))),
    h("tbody", {}, rows));
}

function card(label, value, id) {
  return h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value", id }, value));
}

function setPage(...children) {
  const page = document.getElementById("page");
  page.replaceChildren(...children);
}

// ---------------------------------------------------------------- charts

/** A line chart of series [{name, color, values}] over times (ms), drawn as SVG. */
function chart(title, times, series, format) {
  const width = 400, height = 140, left = 54, bottom = 16;
  const svg = s("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none" });
  const all = series.flatMap((x) => x.values);
  const max = Math.max(1e-9, ...all);
  const t0 = times[0] || 0, t1 = times[times.length - 1] || 1;
  const x = (t) => left + ((t - t0) / Math.max(1, t1 - t0)) * (width - left - 4);
  const y = (v) => 4 + (1 - v / max) * (height - bottom - 8);
  svg.append(s("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, class: "axis" }));
  svg.append(s("line", { x1: left, y1: 4, x2: left, y2: height - bottom, class: "axis" }));
  const top = s("text", { x: 2, y: 12 }); top.textContent = format(max); svg.append(top);
  const zero = s("text", { x: 2, y: height - bottom }); zero.textContent = format(0); svg.append(zero);
  const span = s("text", { x: left, y: height - 2 });
  span.textContent = times.length ? `last ${Math.round((t1 - t0) / 1000)} s` : "sampling…";
  svg.append(span);
  for (const line of series) {
    if (!line.values.length) continue;
    const points = line.values.map((v, i) => `${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    svg.append(s("polyline", { points, fill: "none", stroke: line.color, "stroke-width": 1.6 }));
  }
  const legend = h("div", { class: "legend" }, series.map((line) => {
    const last = line.values[line.values.length - 1];
    return h("span", { style: `color:${line.color}` }, `${line.name}: ${last === undefined ? "–" : format(last)}`);
  }));
  return h("div", { class: "chart", "data-chart": title }, h("div", { class: "title" }, title), legend, svg);
}

function charts(history) {
  const samples = history.samples;
  const times = samples.map((x) => x.time_ms);
  const pick = (key) => samples.map((x) => x[key]);
  const rate = (v) => `${bytes(v)}/s`;
  return h("div", { class: "charts", id: "charts" },
    chart("Bytes in / out per second", times, [
      { name: "in", color: "#2b59c3", values: pick("bytes_in_per_second") },
      { name: "out", color: "#d9480f", values: pick("bytes_out_per_second") },
    ], rate),
    chart("Requests per second", times, [
      { name: "requests", color: "#2b8a3e", values: pick("requests_per_second") },
      { name: "records in", color: "#7048e8", values: pick("records_in_per_second") },
    ], (v) => v.toFixed(1)),
    chart("Latency p99 (per interval)", times, [
      { name: "Produce", color: "#2b59c3", values: pick("produce_p99_ms") },
      { name: "Fetch", color: "#d9480f", values: pick("fetch_p99_ms") },
      { name: "fdatasync", color: "#868e96", values: pick("fdatasync_p99_ms") },
    ], ms),
    chart("Connections", times, [
      { name: "connections", color: "#1098ad", values: pick("connections") },
    ], (v) => v.toFixed(0)));
}

// ---------------------------------------------------------------- overview

async function overviewPage() {
  const [o, history] = await Promise.all([api("GET", "/v1/overview"), api("GET", "/v1/history")]);
  document.getElementById("broker-id").textContent = `node ${o.node_id} · ${o.version}`;
  const disks = o.log_dirs.map((d) => {
    const used = d.total_bytes ? d.used_bytes / d.total_bytes : 0;
    return h("tr", {},
      h("td", { class: "mono" }, d.path),
      h("td", {}, d.error ? d.error : h("div", { class: used > 0.9 ? "bar high" : "bar" },
        h("div", { style: `width:${(used * 100).toFixed(1)}%` }))),
      h("td", { class: "num" }, bytes(d.used_bytes)),
      h("td", { class: "num", "data-free": d.free_bytes }, bytes(d.free_bytes)),
      h("td", { class: "num" }, bytes(d.total_bytes)));
  });
  const latency = o.request_latency.map((r) => h("tr", {},
    h("td", {}, r.request), h("td", { class: "num" }, num(r.count)), h("td", { class: "num" }, num(r.errors)),
    h("td", { class: "num" }, ms(r.p50_ms)), h("td", { class: "num" }, ms(r.p99_ms))));
  const brokers = o.brokers.map((b) => h("tr", {},
    h("td", {}, b.node_id === o.controller_id ? `${b.node_id} (controller)` : b.node_id),
    h("td", { class: "mono" }, `${b.host}:${b.port}`)));
  const d = o.descriptors;
  setPage(
    h("h1", {}, "Overview"),
    h("div", { class: "cards", id: "overview-cards" },
      card("Brokers", o.brokers.length, "card-brokers"),
      card("Topics", o.topics, "card-topics"),
      card("Partitions", num(o.partitions), "card-partitions"),
      card("Bytes in / s", o.bytes_in_per_second === null ? "…" : bytes(o.bytes_in_per_second), "card-in"),
      card("Bytes out / s", o.bytes_out_per_second === null ? "…" : bytes(o.bytes_out_per_second), "card-out"),
      card("Connections", o.connections, "card-connections"),
      o.brokers.length > 1 ? card("Under-replicated", o.under_replicated_partitions, "card-under-replicated") : null,
      card("Log size", bytes(o.log_bytes), "card-log-bytes"),
      card("Open descriptors", `${num(d.open)} / ${num(d.limit)}`, "card-descriptors"),
      card("Uptime", `${Math.floor(o.uptime_seconds / 60)} min`, "card-uptime")),
    h("h2", {}, h("a", { href: "#/transactions" }, "Transactions")),
    transactionCards(o.transactions),
    h("h2", {}, "Last minutes"),
    h("p", { class: "muted" }, `Sampled every ${history.sample_every_seconds} s while this page is open ` +
      `(at most ${history.samples_max} samples).`),
    charts(history),
    h("h2", {}, "Log directories"),
    table(["Path", "Use", "Used ", "Free ", "Size "], disks, { id: "log-dirs" }),
    h("h2", {}, "Request latency since start"),
    table(["Request", "Count ", "Errors ", "p50 ", "p99 "], latency, { id: "latency" }),
    h("h2", {}, "Brokers"),
    table(["Node", "Kafka listener"], brokers, { id: "brokers" }));
  timer = setTimeout(() => route(), REFRESH_MS);
}

/** The transaction figures /metrics exports: open now, ended since start, how far consumers of
 * committed data trail. */
function transactionCards(t) {
  return h("div", { class: "cards", id: "transaction-cards" },
    card("Open", num(t.ongoing), "card-txn-ongoing"),
    card("Committed", num(t.committed_total), "card-txn-committed"),
    card("Aborted", num(t.aborted_total), "card-txn-aborted"),
    card("Last stable offset lag", num(t.last_stable_offset_lag), "card-lso-lag"));
}

// ---------------------------------------------------------------- topics

async function topicsPage() {
  const { topics } = await api("GET", "/v1/topics");
  const rows = topics.map((t) => h("tr", { "data-topic": t.name },
    h("td", {}, h("a", { href: `#/topic/${enc(t.name)}` }, t.name), t.internal ? h("span", { class: "muted" }, " internal") : null),
    h("td", { class: "num" }, t.partitions),
    h("td", { class: "num" }, t.replication_factor),
    h("td", { class: "num" }, num(t.records)),
    h("td", { class: "num" }, bytes(t.size_bytes)),
    h("td", { class: "mono" }, Object.entries(t.configs).map(([k, v]) => `${k}=${v}`).join(" ")),
    h("td", {}, t.internal ? null : h("button", { class: "danger", "data-delete": t.name, onclick: () => confirmDelete(t.name) }, "Delete"))));
  const form = h("form", { class: "inline", id: "create-topic", onsubmit: createTopic },
    h("label", {}, "Name", h("input", { name: "name", required: true, pattern: "[a-zA-Z0-9._\\-]+", maxlength: 249 })),
    h("label", {}, "Partitions", h("input", { name: "partitions", type: "number", min: 1, value: 3 })),
    h("label", {}, "Replication factor", h("input", { name: "replication_factor", type: "number", min: 1, placeholder: "default" })),
    h("label", {}, "Configs (key=value, space-separated)", h("input", { name: "configs", size: 30, placeholder: "retention.ms=86400000" })),
    h("button", { type: "submit" }, "Create topic"));
  setPage(h("h1", {}, "Topics"), form, h("div", { id: "notice", class: "notice" }),
    table(["Name", "Partitions ", "Replicas ", "Records ", "Size ", "Config overrides", ""], rows, { id: "topics" }),
    h("p", { class: "muted" }, "Records and size count partitions opened since the broker started; a topic's page opens them."));
}

async function createTopic(event) {
  event.preventDefault();
  const form = event.target;
  const configs = {};
  for (const pair of form.configs.value.split(/\s+/).filter(Boolean)) {
    const at = pair.indexOf("=");
    if (at <= 0) return showError(new Error(`config ${pair}: expected key=value`));
    configs[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const body = { name: form.name.value, configs };
  if (form.partitions.value) body.partitions = Number(form.partitions.value);
  if (form.replication_factor.value) body.replication_factor = Number(form.replication_factor.value);
  try {
    await api("POST", "/v1/topics", body);
    await topicsPage();
    document.getElementById("notice").textContent = `Created topic ${body.name}.`;
  } catch (e) { showError(e); }
}

/** Deleting asks for the topic's name to be typed again. */
function confirmDelete(name) {
  const input = h("input", { id: "confirm-name", autocomplete: "off" });
  const close = () => dialog.remove();
  const dialog = h("div", { class: "dialog", id: "confirm-delete" }, h("div", {},
    h("h2", {}, `Delete topic ${name}?`),
    h("p", {}, "Its partitions and all their records are removed. Type the topic's name to confirm."),
    input,
    h("p", {},
      h("button", { class: "danger", id: "confirm-delete-button", onclick: async () => {
        if (input.value !== name) return showError(new Error("the name does not match"));
        try {
          await api("DELETE", `/v1/topics/${enc(name)}`);
          close();
          await topicsPage();
          document.getElementById("notice").textContent = `Deleted topic ${name}.`;
        } catch (e) { showError(e); }
      } }, "Delete"), " ",
      h("button", { class: "secondary", onclick: close }, "Cancel"))));
  document.body.append(dialog);
  input.focus();
}

// ---------------------------------------------------------------- one topic

async function topicPage(name) {
  const t = await api("GET", `/v1/topics/${enc(name)}`);
  const rows = t.partitions.map((p) => h("tr", {},
    h("td", { class: "num" }, p.partition), h("td", { class: "num" }, p.leader),
    h("td", {}, p.replicas.join(", ")), h("td", {}, p.isr.join(", ")),
    h("td", { class: "num" }, num(p.log_start_offset)), h("td", { class: "num" }, num(p.high_watermark)),
    h("td", { class: "num" }, num(p.last_stable_offset)), h("td", { class: "num" }, bytes(p.size_bytes))));
  const configs = t.configs.map((c) => h("tr", {},
    h("td", { class: "mono" }, c.name), h("td", { class: "mono" }, c.value === null ? "–" : c.value), h("td", {}, c.source)));
  const grow = h("form", { class: "inline", id: "add-partitions", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api("POST", `/v1/topics/${enc(name)}/partitions`, { count: Number(event.target.count.value) });
      await topicPage(name);
    } catch (e) { showError(e); }
  } },
  h("label", {}, "New partition count", h("input", { name: "count", type: "number", min: t.partitions.length + 1, value: t.partitions.length + 1 })),
  h("button", { type: "submit", class: "secondary" }, "Add partitions"));
  const browser = h("form", { class: "inline", id: "browse", onsubmit: (event) => { event.preventDefault(); browse(name); } },
    h("label", {}, "Partition", h("select", { name: "partition" }, t.partitions.map((p) => h("option", { value: p.partition }, p.partition)))),
    h("label", {}, "From", h("select", { name: "mode" },
      h("option", { value: "latest" }, "latest"), h("option", { value: "offset" }, "offset"), h("option", { value: "timestamp" }, "timestamp (ms)"))),
    h("label", {}, "Offset / timestamp", h("input", { name: "at", type: "number", min: 0 })),
    h("label", {}, "Records", h("input", { name: "limit", type: "number", min: 1, max: 200, value: 20 })),
    h("label", {}, "Show as", h("select", { name: "as" }, h("option", { value: "text" }, "text"), h("option", { value: "hex" }, "hex"))),
    h("button", { type: "submit" }, "Show records"));
  setPage(h("h1", {}, `Topic ${name}`),
    table(["Partition ", "Leader ", "Replicas", "ISR", "Start offset ", "High watermark ", "Last stable offset ", "Size "],
      rows, { id: "partitions" }),
    grow,
    h("h2", {}, "Records"), browser, h("div", { id: "records" }),
    h("h2", {}, "Configs"), table(["Name", "Value", "Source"], configs, { id: "configs" }));
}

function shown(value, as) {
  if (value === null) return h("span", { class: "muted" }, "null");
  const text = as === "text" && value.text !== null ? value.text : value.hex;
  return h("span", {}, text, value.truncated ? h("span", { class: "muted" }, ` … (${bytes(value.size)})`) : null);
}

async function browse(name) {
  const form = document.getElementById("browse");
  const params = new URLSearchParams({ partition: form.partition.value, limit: form.limit.value || 20 });
  if (form.mode.value !== "latest") params.set(form.mode.value, form.at.value || 0);
  try {
    const page = await api("GET", `/v1/topics/${enc(name)}/records?${params}`);
    const as = form.as.value;
    const rows = page.records.map((r) => h("tr", { "data-offset": r.offset },
      h("td", { class: "num" }, r.offset),
      h("td", {}, new Date(r.timestamp).toISOString()),
      h("td", { class: "value-cell mono" }, shown(r.key, as)),
      h("td", { class: "mono" }, r.headers.map((x) => h("div", {}, `${x.key}: `, shown(x.value, as)))),
      h("td", { class: "value-cell mono" }, shown(r.value, as))));
    document.getElementById("records").replaceChildren(
      h("p", { class: "muted" }, `Offsets ${page.log_start_offset} to ${page.high_watermark - 1}; ` +
        `showing ${page.records.length} from ${page.from_offset} (each field's first ${page.preview_bytes} bytes).`),
      table(["Offset ", "Timestamp", "Key", "Headers", "Value"], rows, { id: "record-table" }));
  } catch (e) { showError(e); }
}

// ---------------------------------------------------------------- consumer groups

async function groupsPage() {
  const { groups } = await api("GET", "/v1/groups");
  const rows = groups.map((g) => h("tr", { "data-group": g.group },
    h("td", {}, h("a", { href: `#/group/${enc(g.group)}` }, g.group)),
    h("td", {}, g.type || "classic"),
    h("td", {}, h("span", { class: `pill ${g.state}` }, g.state)),
    h("td", {}, g.protocol_type),
    h("td", { class: "num" }, num(g.partitions_committed)),
    h("td", { class: "num" }, num(g.lag))));
  setPage(h("h1", {}, "Consumer groups"),
    table(["Group", "Type", "State", "Protocol", "Partitions committed ", "Lag "], rows, { id: "groups" }));
}

const lagHistory = new Map(); // "topic/partition" -> recent lags, while this page is open
const LAG_POINTS_MAX = 300;

/** The group's page: the reset form once, its tables and lag chart refreshed in place. */
async function groupPage(id) {
  const reset = h("form", { class: "inline", id: "reset-offsets", onsubmit: (event) => { event.preventDefault(); previewReset(id, false); } },
    h("label", {}, "Topic", h("input", { name: "topic", required: true })),
    h("label", {}, "To", h("select", { name: "to" },
      ["earliest", "latest", "offset", "timestamp"].map((x) => h("option", { value: x }, x)))),
    h("label", {}, "Offset / timestamp (ms)", h("input", { name: "value", type: "number", min: 0 })),
    h("button", { type: "submit", class: "secondary" }, "Preview"));
  lagHistory.clear();
  setPage(h("h1", {}, `Consumer group ${id} `, h("span", { id: "group-state" })),
    h("div", { id: "group-data" }),
    h("h2", {}, "Reset offsets"),
    h("p", { class: "muted" }, "Preview first; the coordinator commits new offsets only while the group has no members."),
    reset, h("div", { id: "reset-preview" }));
  await groupData(id);
}

async function groupData(id) {
  const hash = location.hash;
  const g = await api("GET", `/v1/groups/${enc(id)}`);
  if (location.hash !== hash || !document.getElementById("group-data")) return;
  document.getElementById("group-state").replaceChildren(h("span", { class: `pill ${g.state}` }, g.state));
  const form = document.getElementById("reset-offsets");
  if (!form.topic.value && g.offsets.length) form.topic.value = g.offsets[0].topic;
  const members = groupMembers(g);
  const now = Date.now();
  for (const o of g.offsets) {
    const key = `${o.topic}/${o.partition}`;
    const points = lagHistory.get(key) || [];
    points.push([now, o.lag || 0]);
    while (points.length > LAG_POINTS_MAX) points.shift();
    lagHistory.set(key, points);
  }
  const offsets = g.offsets.map((o) => h("tr", {},
    h("td", {}, o.topic), h("td", { class: "num" }, o.partition), h("td", { class: "num" }, num(o.committed_offset)),
    h("td", { class: "num" }, num(o.high_watermark)), h("td", { class: "num" }, num(o.lag)),
    h("td", { class: "mono" }, o.member_id || "–")));
  const colors = ["#2b59c3", "#d9480f", "#2b8a3e", "#7048e8", "#1098ad", "#e64980", "#f59f00", "#868e96"];
  const shownLags = g.offsets.slice(0, colors.length);
  const lagSeries = shownLags.map((o, i) => ({
    name: `${o.topic}-${o.partition}`,
    color: colors[i],
    values: (lagHistory.get(`${o.topic}/${o.partition}`) || []).map((p) => p[1]),
  }));
  const first = shownLags[0];
  const lagTimes = first ? lagHistory.get(`${first.topic}/${first.partition}`).map((p) => p[0]) : [];
  document.getElementById("group-data").replaceChildren(
    ...members,
    h("h2", {}, "Committed offsets and lag"),
    table(["Topic", "Partition ", "Committed ", "High watermark ", "Lag ", "Member"], offsets, { id: "offsets" }),
    h("div", { class: "charts" }, chart("Lag while this page is open", lagTimes, lagSeries, (v) => v.toFixed(0))));
  timer = setTimeout(() => groupData(id).catch(showError), REFRESH_MS * 2);
}

/** Topics and partitions as "orders: 0, 1; payments: 3". */
const partitionsText = (assignment) => assignment.map((a) => `${a.topic}: ${a.partitions.join(", ")}`).join("; ");

/** The group page's members: a classic group's with their assignment; a consumer group's
 * (KIP-848) after its epochs and assignor, each with its epoch and current and target assignment. */
function groupMembers(g) {
  if (g.type !== "consumer") {
    const rows = g.members.map((m) => h("tr", {},
      h("td", { class: "mono" }, m.member_id), h("td", {}, m.client_id), h("td", {}, m.client_host),
      h("td", {}, partitionsText(m.assignment))));
    return [h("h2", {}, "Members"), table(["Member", "Client", "Host", "Assignment"], rows, { id: "members" })];
  }
  const rows = g.members.map((m) => h("tr", {},
    h("td", { class: "mono" }, m.member_id), h("td", {}, m.instance_id || "–"),
    h("td", { class: "num" }, m.member_epoch), h("td", {}, m.client_id), h("td", {}, m.client_host || "–"),
    h("td", {}, partitionsText(m.assignment)), h("td", {}, partitionsText(m.target_assignment))));
  return [
    h("p", { id: "group-epochs" }, `Consumer protocol (KIP-848), assignor ${g.assignor}; ` +
      `group epoch ${g.group_epoch}, assignment epoch ${g.assignment_epoch}.`),
    h("h2", {}, "Members"),
    table(["Member", "Instance", "Epoch ", "Client", "Host", "Assigned", "Target"], rows, { id: "members" }),
  ];
}

async function previewReset(id, execute) {
  const form = document.getElementById("reset-offsets");
  const body = { topic: form.topic.value, to: form.to.value, execute };
  if (form.to.value === "offset") body.offset = Number(form.value.value || 0);
  if (form.to.value === "timestamp") body.timestamp = Number(form.value.value || 0);
  try {
    const answer = await api("POST", `/v1/groups/${enc(id)}/reset-offsets`, body);
    const rows = answer.partitions.map((p) => h("tr", {},
      h("td", { class: "num" }, p.partition), h("td", { class: "num" }, num(p.current_offset)), h("td", { class: "num" }, num(p.new_offset))));
    document.getElementById("reset-preview").replaceChildren(
      table(["Partition ", "Current offset ", "New offset "], rows, { id: "reset-table" }),
      execute
        ? h("p", { class: "notice", id: "reset-done" }, `Committed new offsets for ${answer.topic}.`)
        : h("p", {}, h("button", { class: "danger", id: "reset-execute", onclick: () => previewReset(id, true) }, "Commit these offsets")));
  } catch (e) { showError(e); }
}

// ---------------------------------------------------------------- transactions

const TXN_STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
  "Dead", "PrepareEpochFence"];
// The states of a transaction still open: its age counts against its timeout.
const OPEN_TXN_STATES = new Set(["Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"]);

/** A duration in ms as "4 s", "3 min 20 s", "1 min", "2 h 5 min". */
function duration(n) {
  const seconds = Math.max(0, Math.floor(n / 1000));
  const [big, unit, small, smallUnit] = seconds < 3600
    ? [Math.floor(seconds / 60), "min", seconds % 60, "s"]
    : [Math.floor(seconds / 3600), "h", Math.floor(seconds / 60) % 60, "min"];
  if (!big) return `${small} ${smallUnit}`;
  return small ? `${big} ${unit} ${small} ${smallUnit}` : `${big} ${unit}`;
}

/** "orders: 0, 2; payments: 1" from [{topic, partition}]. */
function partitionList(partitions) {
  const byTopic = new Map();
  for (const p of partitions) byTopic.set(p.topic, [...(byTopic.get(p.topic) || []), p.partition]);
  return [...byTopic].map(([topic, ids]) => `${topic}: ${ids.join(", ")}`).join("; ");
}

/** Ongoing first, then the other open ones, each oldest first; then the ended ones by id. */
function transactionOrder(a, b) {
  const rank = (t) => (t.state === "Ongoing" ? 0 : OPEN_TXN_STATES.has(t.state) ? 1 : 2);
  return rank(a) - rank(b) || (rank(a) < 2 ? a.start_ms - b.start_ms : 0) ||
    a.transactional_id.localeCompare(b.transactional_id);
}

/** Every transactional id this broker coordinates, refreshed; `state` filters (by the API). */
async function transactionsPage(state) {
  const query = state ? `?state=${enc(state)}` : "";
  const { now_ms: now, transactions } = await api("GET", `/v1/transactions${query}`);
  const rows = transactions.sort(transactionOrder).map((t) => {
    const open = OPEN_TXN_STATES.has(t.state);
    const age = now - t.start_ms;
    // Past half its timeout an open transaction is close to being aborted by the coordinator.
    const old = open && age > t.timeout_ms / 2;
    return h("tr", { "data-transaction": t.transactional_id },
      h("td", { class: "mono" }, t.transactional_id),
      h("td", {}, h("span", { class: `pill ${t.state}` }, t.state)),
      h("td", { class: "num" }, t.producer_id),
      h("td", { class: "num" }, t.producer_epoch),
      h("td", { class: old ? "num old" : "num", title: old ? "older than half its timeout" : null },
        open ? duration(age) : "–"),
      h("td", { class: "num" }, duration(t.timeout_ms)),
      h("td", { class: "num" }, `${duration(now - t.last_update_ms)} ago`),
      h("td", {}, partitionList(t.partitions)));
  });
  const filter = h("form", { class: "inline", id: "transaction-filter" },
    h("label", {}, "State", h("select", { name: "state", onchange: (event) => {
      location.hash = event.target.value ? `#/transactions/${event.target.value}` : "#/transactions";
    } }, h("option", { value: "" }, "any"),
    TXN_STATES.map((x) => h("option", { value: x, selected: x === state }, x)))));
  setPage(h("h1", {}, "Transactions"), filter,
    table(["Transactional id", "State", "Producer id ", "Epoch ", "Age ", "Timeout ", "Last update ", "Partitions"],
      rows, { id: "transactions" }),
    h("p", { class: "muted" }, "The transactional ids this broker coordinates, with their current or last " +
      "transaction. An open transaction's age is highlighted past half its timeout, after which the " +
      "coordinator aborts it."));
  timer = setTimeout(() => route(), REFRESH_MS);
}

// ---------------------------------------------------------------- routing

async function route() {
  clearTimeout(timer);
  const hash = location.hash || "#/overview";
  const [, page, arg] = hash.split("/");
  for (const link of document.querySelectorAll("header nav a")) {
    const target = link.getAttribute("href").split("/")[1];
    link.classList.toggle("active", target === page || (target === "topics" && page === "topic") || (target === "groups" && page === "group"));
  }
  try {
    if (page === "topics") await topicsPage();
    else if (page === "topic") await topicPage(decodeURIComponent(arg || ""));
    else if (page === "groups") await groupsPage();
    else if (page === "group") await groupPage(decodeURIComponent(arg || ""));
    else if (page === "transactions") await transactionsPage(decodeURIComponent(arg || ""));
    else await overviewPage();
    document.body.dataset.loaded = hash;
  } catch (e) {
    showError(e);
    timer = setTimeout(() => route(), REFRESH_MS * 2);
  }
}

window.addEventListener("hashchange", route);
route();
