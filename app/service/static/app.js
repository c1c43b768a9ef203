// The planner's page: reads and writes its inputs in the address, calls the REST API.
"use strict";

const FIELDS = ["profile", "model", "cpu_tasks", "io_tasks", "cores", "disks", "file_size",
  "propagation_delay", "buffer_packets", "coalesce_packets", "line_rate", "mu_net"];
const HOST_QUERY = { mu_io_cpu: "mu_io_cpu", mu_disk: "mu_disk", mu_net: "mu_net",
  buffer_packets: "buffer_packets", coalesce_packets: "coalesce_packets",
  line_rate_bps: "line_rate", packet_payload_bytes: "packet_payload" };
const SWEEPABLE = ["cpu_tasks", "io_tasks", "cores", "disks", "buffer_packets",
  "coalesce_packets", "mu_net", "line_rate", "file_size", "propagation_delay"];

const $ = (id) => document.getElementById(id);
const form = $("inputs");
// Built-in profiles only: the plot, what-if and sweep endpoints take no stored one, so a
// stored profile reaches them as its values (the overrides), not by name.
let builtInProfiles = new Set(["sx280-2007"]);
// Stored profiles whose provenance carries the time-slice model's calibration (see
// transport.time_slice_costs): not inputs of the plots and sweeps.
const CALIBRATION_KEYS = ["time_slice_s", "kernel_s_per_datagram", "wakeup_s", "effective_competitors"];
let calibratedProfiles = new Set();
let pointQuery = null;  // the query of the last answer, in SI units (for plots, what-if, sweeps)

function fmtRate(bps) {
  if (bps >= 1e9) return (bps / 1e9).toFixed(3) + " Gbit/s";
  return (bps / 1e6).toFixed(1) + " Mbit/s";
}
function fmtTime(s) { return s >= 100 ? s.toFixed(0) + " s" : s.toPrecision(4) + " s"; }
function fmtNum(x, digits = 4) { return Number(x).toPrecision(digits); }

// Loss as people read it: a percentage, and "below 0.0001 %" rather than 2.36e-10.
function fmtLoss(p) {
  if (p < 1e-6) return "below 0.0001 %";
  return (p * 100).toPrecision(3) + " %";
}

const LIMITED_WHY = {
  "end-system": "Limited by the end system: the receiving host (the CPU share of its interrupt " +
    "path, its NIC ring) cannot take packets faster. Sending faster only adds loss and resends.",
  "line-rate": "Limited by the line rate: the transfer sends at the line rate. With the " +
    "paper's model the receiving host could take more than the network carries; with the " +
    "time-slice model it may lose part of each blast while the scheduler runs other tasks, " +
    "and resending that is still quicker than sending slower.",
};

// The form's label of an API field ("query.cores" -> "Cores m"), or null.
function fieldLabel(field) {
  const name = String(field).split(".").pop().replace(/_(bytes|s|bps)$/, "");
  const alias = { file_size: "file_size", propagation_delay: "propagation_delay",
    line_rate: "line_rate" }[name] || name;
  const el = form.elements[alias];
  if (!el) return null;
  const label = el.closest("label");
  return { el, text: label ? label.childNodes[0].textContent.trim() : alias };
}

function clearInvalid() {
  for (const el of form.querySelectorAll("[aria-invalid=true]")) el.removeAttribute("aria-invalid");
}

// An error replaces what was shown before: no earlier answer stays under it.
function showError(text) {
  const box = $("error");
  box.textContent = text;
  box.hidden = !text;
  if (text) {
    for (const id of ["answer", "plots", "whatif", "sweep"]) $(id).hidden = true;
    pointQuery = null;
  }
}

async function problemText(response) {
  try {
    const body = await response.json();
    const lines = (body.errors || []).map((e) => {
      const known = fieldLabel(e.field);
      if (!known) return `${e.field}: ${e.reason}`;
      known.el.setAttribute("aria-invalid", "true");
      return `${known.text}: ${plainReason(e.reason)}`;
    });
    const title = response.status === 422 ? "Please check the marked field" :
      body.title || response.statusText;
    return title + (lines.length ? "\n" + lines.join("\n") : body.detail ? "\n" + body.detail : "");
  } catch (_) {
    return `The server answered ${response.status} ${response.statusText}.`;
  }
}

// pydantic's wording, as a person would say it.
function plainReason(reason) {
  return String(reason)
    .replace(/^Input should be less than or equal to (.*)$/, "must be at most $1")
    .replace(/^Input should be greater than or equal to (.*)$/, "must be at least $1")
    .replace(/^Input should be a valid integer.*$/, "must be a whole number")
    .replace(/^Input should be a valid number.*$/, "must be a number");
}

const WORKLOAD = ["cpu_tasks", "io_tasks", "cores", "disks"];

function formQuery() {
  const q = new URLSearchParams();
  const live = form.elements.profile.value === "live";
  for (const name of FIELDS) {
    // Live mode measures the workload: the form's C and I are not part of the question.
    if (live && WORKLOAD.includes(name)) continue;
    const el = form.elements[name];
    const value = el && el.value.trim();
    if (value) q.set(name, value);
  }
  return q;
}

function fillForm(params) {
  for (const name of FIELDS) {
    if (params.has(name) && form.elements[name]) {
      const el = form.elements[name];
      if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === params.get(name))) {
        el.add(new Option(params.get(name), params.get(name)));
      }
      el.value = params.get(name);
    }
  }
  if (["buffer_packets", "coalesce_packets", "line_rate", "mu_net"].some((n) => params.has(n))) {
    $("overrides").open = true;
  }
}

// The answer's normalised inputs as a query string every plot endpoint accepts.
function queryFromInputs(inputs) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(inputs.workload)) q.set(k, v);
  const host = inputs.host;
  if (builtInProfiles.has(host.profile)) q.set("profile", host.profile);
  for (const [field, name] of Object.entries(HOST_QUERY)) {
    if (host[field] !== undefined && host[field] !== null) q.set(name, host[field]);
  }
  q.set("file_size", inputs.transfer.file_size_bytes);
  q.set("propagation_delay", inputs.transfer.propagation_delay_s);
  if (inputs.nic_service) q.set("nic_service", inputs.nic_service);
  if (inputs.model) q.set("model", inputs.model);
  return q;
}

function showAnswer(body) {
  $("rate").textContent = fmtRate(body.effective_bottleneck_rate_bps);
  $("time").textContent = fmtTime(body.transfer_time_s);
  $("loss").textContent = fmtLoss(body.loss_probability);
  $("loss").title = "probability " + fmtNum(body.loss_probability, 3);
  $("mu").textContent = Math.round(body.interrupt_service_rate_per_s).toLocaleString("en") + " /s";
  $("limited").textContent = body.limited_by;
  $("limited-why").textContent = LIMITED_WHY[body.limited_by] || "";
  $("rounds").textContent = body.rounds;
  const host = body.inputs.host;
  $("host-used").textContent = `${host.profile}: ring K = ${host.buffer_packets} packets, ` +
    `coalescing N = ${host.coalesce_packets}, μnet = ${Math.round(host.mu_net).toLocaleString("en")} /s, ` +
    `line ${fmtRate(host.line_rate_bps)}`;
  const w = body.inputs.workload;
  const live = body.workload_source === "live";
  $("live-workload").hidden = !live;
  $("live-workload").textContent = live ? `The probe found C = ${w.cpu_tasks} CPU-bound and ` +
    `I = ${w.io_tasks} I/O-bound tasks on m = ${w.cores} cores and d = ${w.disks} disks.` : "";
  const link = $("share-link");
  link.href = location.href;
  link.textContent = location.href;
  $("answer").hidden = false;
}

// The plots appear once the new ones have loaded: never an earlier answer's plots
// beside this answer's numbers.
function showPlots(query) {
  const box = $("plots");
  const kinds = ["transfer-time", "loss", "service-time-cdf"];
  let loaded = 0;
  box.hidden = true;
  for (const kind of kinds) {
    const img = $("plot-" + kind);
    img.onload = () => {
      loaded += 1;
      if (loaded === kinds.length && pointQuery === query) box.hidden = false;
    };
    img.src = `/plots/${kind}?${query}`;
  }
}

async function liveAvailable() {
  try {
    const r = await fetch("/host", { headers: { Accept: "application/json" } });
    if (r.ok) return null;
    return `The live host probe is not available on this server (GET /host answered ${r.status}). ` +
      "Choose a host profile instead.";
  } catch (err) {
    return `The live host probe could not be reached (${err}). Choose a host profile instead.`;
  }
}

let computing = 0;  // the latest compute; an earlier one's answer is not shown

async function compute(event) {
  if (event) event.preventDefault();
  const mine = ++computing;
  showError("");
  clearInvalid();
  // An earlier answer's plots still loading must not appear beside this answer.
  pointQuery = null;
  $("plots").hidden = true;
  const q = formQuery();
  history.replaceState(null, "", "/?" + q.toString());
  const button = $("compute");
  button.disabled = true;
  button.textContent = "Computing…";
  try {
    let url;
    if (q.get("profile") === "live") {
      const problem = await liveAvailable();
      $("live-note").hidden = !problem;
      $("live-note").textContent = problem || "";
      if (problem) { showError(problem); return; }
      const live = new URLSearchParams({ workload: "live", model: q.get("model") || "timeslice",
        file_size: q.get("file_size") || "", propagation_delay: q.get("propagation_delay") || "" });
      url = "/bottleneck-rate?" + live;
    } else {
      url = "/bottleneck-rate?" + q;
    }
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (mine !== computing) return;
    if (!response.ok) { showError(await problemText(response)); return; }
    const body = await response.json();
    if (mine !== computing) return;
    showAnswer(body);
    // The plots and sweeps draw the answer's own model; what-if ranks with the paper's.
    const timeslice = body.inputs.model === "timeslice";
    $("model-note").hidden = !timeslice;
    $("loss-caption").textContent = timeslice
      ? "The first blast's loss against sending rate." : "NIC loss against sending rate.";
    // A calibrated profile's slice and costs are not inputs of the plots and sweeps,
    // which would then draw the time-slice model without them: not shown.
    const drawable = !timeslice || !calibratedProfiles.has(body.inputs.host.profile);
    $("calibrated-note").hidden = drawable;
    pointQuery = queryFromInputs(body.inputs);
    if (drawable) showPlots(pointQuery);
    else $("plots").hidden = true;
    $("whatif").hidden = false;
    $("sweep").hidden = !drawable;
  } catch (err) {
    showError("The service could not be reached: " + err);
  } finally {
    if (mine === computing) {
      button.disabled = false;
      button.textContent = "Compute";
    }
  }
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

async function whatIf(event) {
  event.preventDefault();
  if (!pointQuery) return;
  const f = event.target;
  const out = $("whatif-out");
  out.textContent = "Ranking…";
  // Ranked with the paper's model (the time-slice model would take half a minute).
  const inputs = { ...Object.fromEntries(pointQuery.entries()), model: "paper" };
  const body = { inputs, max_buffer_packets: Number(f.elements.max_buffer_packets.value),
    interface: f.elements.interface.value };
  const response = await fetch("/what-if", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  if (!response.ok) { out.textContent = ""; showError(await problemText(response)); return; }
  const result = await response.json();
  out.textContent = "";
  if (result.best_ring) {
    const best = document.createElement("div");
    best.className = "best";
    best.innerHTML = `<strong>Best ring and coalescing:</strong> K = ${result.best_ring.buffer_packets}, ` +
      `N = ${result.best_ring.coalesce_packets} → ${fmtRate(result.best_ring.effective_bottleneck_rate_bps)}, ` +
      `${fmtTime(result.best_ring.transfer_time_s)}<br>` +
      result.best_ring.commands.map((c) => `<code>${c.replace(/[<>&]/g, "")}</code>`).join(" ");
    out.appendChild(best);
  }
  const table = document.createElement("table");
  table.id = "whatif-table";
  table.innerHTML = "<thead><tr><th>Change</th><th>Rate</th><th>Transfer time</th><th>Effect</th></tr></thead>";
  const tbody = document.createElement("tbody");
  for (const c of result.changes) {
    const tr = document.createElement("tr");
    tr.appendChild(cell(c.description));
    tr.appendChild(cell(c.error ? "–" : fmtRate(c.effective_bottleneck_rate_bps), "num"));
    tr.appendChild(cell(c.error ? "never completes" : fmtTime(c.transfer_time_s), "num"));
    const saved = c.time_saved_s;
    let text = "";
    if (saved !== null) {
      text = Math.abs(saved) < 1e-3 ? "no change"
        : fmtTime(Math.abs(saved)) + (saved > 0 ? " faster" : " slower");
    }
    tr.appendChild(cell(text, "num " + (saved > 1e-3 ? "gain" : saved < -1e-3 ? "loss" : "")));
    tbody.appendChild(tr);
  }
  table.appendChild(tbody);
  out.appendChild(table);
}

async function sweep(event) {
  event.preventDefault();
  if (!pointQuery) return;
  const f = event.target;
  const q = new URLSearchParams(pointQuery);
  const x = f.elements.x.value;
  const series = f.elements.series.value;
  q.set(x, f.elements.x_values.value);
  if (series && series !== x) q.set(series, f.elements.series_values.value);
  q.set("x", x);
  if (series && series !== x) q.set("series", series);
  const img = $("plot-sweep");
  img.hidden = false;
  img.src = "/plots/sweep?" + q;
  const inputs = Object.fromEntries([...q.entries()].filter(([k]) => k !== "x" && k !== "series"));
  const response = await fetch("/sweeps", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ inputs, format: "csv" }) });
  if (response.ok) {
    const blob = new Blob([await response.text()], { type: "text/csv" });
    $("sweep-csv-link").href = URL.createObjectURL(blob);
    $("sweep-csv").hidden = false;
  } else {
    showError(await problemText(response));
  }
}

async function loadProfiles() {
  try {
    const r = await fetch("/profiles");
    if (!r.ok) return;
    const body = await r.json();
    const select = $("profile");
    const chosen = select.value;
    select.innerHTML = "";
    for (const p of body.profiles) {
      if (p.built_in) builtInProfiles.add(p.name);
      const given = (v) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);
      if (CALIBRATION_KEYS.some((k) => p.provenance && given(p.provenance[k]))) {
        calibratedProfiles.add(p.name);
      }
      select.add(new Option(p.name, p.name));
    }
    select.add(new Option("live: probe this server's host", "live"));
    select.value = chosen;
  } catch (_) { /* the built-in default stays */ }
}

function fillSweepChoices() {
  for (const [id, chosen] of [["sweep-x", "cpu_tasks"], ["sweep-series", "io_tasks"]]) {
    const select = $(id);
    if (id === "sweep-series") select.add(new Option("(none)", ""));
    for (const name of SWEEPABLE) select.add(new Option(name, name));
    select.value = chosen;
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  fillSweepChoices();
  await loadProfiles();
  const params = new URLSearchParams(location.search);
  fillForm(params);
  form.addEventListener("submit", compute);
  $("whatif-form").addEventListener("submit", whatIf);
  $("sweep-form").addEventListener("submit", sweep);
  const liveMode = () => { $("workload").disabled = $("profile").value === "live"; };
  liveMode();
  $("profile").addEventListener("change", async () => {
    liveMode();
    if ($("profile").value !== "live") { $("live-note").hidden = true; return; }
    const problem = await liveAvailable();
    $("live-note").hidden = !problem;
    $("live-note").textContent = problem || "";
  });
  if (["cpu_tasks", "io_tasks", "file_size", "propagation_delay"].every((n) => params.has(n))) {
    compute();
  }
  document.body.dataset.ready = "true";
});
