// The playground: source 000's exercise button by button, and a free mode. Every figure on the
// page is what the server measured on the broker; the buttons only ask.
"use strict";

const $ = (id) => document.getElementById(id);
let exercise = null;
let free = null;
let busy = false;

const exBroker = new BrokerPanel($("ex-broker"), { only: (t) => exercise && t.name === exercise.topic });
exBroker.height = Math.max(56, Math.round((window.innerHeight - 420) / 3));
const freeBroker = new BrokerPanel($("f-broker"), { only: (t) => free && t.name === free.topic });
freeBroker.height = Math.max(80, Math.round((window.innerHeight - 330) / 2));


for (let k = 0; k < 12; k++) $("hot-key").insertAdjacentHTML("beforeend", `<option value="${k}">key ${k}</option>`);
$("f-hot").insertAdjacentHTML("beforeend", `<option value="">none (uniform)</option>`);
for (let k = 0; k < 24; k++) $("f-hot").insertAdjacentHTML("beforeend", `<option value="${k}">key-${String(k).padStart(2, "0")}</option>`);

function tab(name) {
  for (const t of ["exercise", "free"]) {
    $(t).classList.toggle("on", t === name);
    $("tab-" + t).classList.toggle("on", t === name);
  }
}
$("tab-exercise").onclick = () => tab("exercise");
$("tab-free").onclick = () => tab("free");

async function ask(path, body, message) {
  busy = true;
  renderExercise();
  try {
    const answer = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const got = await answer.json();
    if (!answer.ok) {
      $(message).textContent = got.error;
    } else if (path === "/api/exercise") {
      exercise = got;
    } else {
      free = got;
    }
  } catch (e) {
    $(message).textContent = String(e);
  } finally {
    busy = false;
    renderExercise();
    renderFree();
  }
}

const act = (action, key) => ask("/api/exercise", key === undefined ? { action } : { action, key }, "ex-message");
$("uniform").onclick = () => act("uniform");
$("hot").onclick = () => act("hot", Number($("hot-key").value));
$("hot-key").onchange = () => { if (exercise && exercise.load === "hot") act("hot", Number($("hot-key").value)); };
$("batch").onclick = () => act("batch");
$("drain").onclick = () => act("drain");
$("reset").onclick = () => act("reset");

function renderExercise() {
  const ex = exercise;
  for (const id of ["uniform", "hot", "hot-key", "batch", "drain", "reset"]) $(id).disabled = busy || !ex;
  if (!ex) return;
  $("uniform").classList.toggle("on", ex.load === "uniform");
  $("hot").classList.toggle("on", ex.load === "hot");
  if (ex.hot_key !== null) $("hot-key").value = String(ex.hot_key);
  if (!busy) $("ex-message").textContent = ex.message;
  const rows = ex.rows.map((r) => `<tr data-partition="${r.partition}"><td>P${r.partition}<small>keys ${r.keys.join(", ")}</small></td>` +
    `<td class="arrived">${r.arrived}</td><td class="received">${r.received}</td><td class="completed">${r.completed}</td>` +
    `<td class="queued${r.queued > 0 ? " busy" : ""}">${r.queued}</td></tr>`).join("");
  $("ex-table").innerHTML = `<tr><th>Partition / keys</th><th>Arrived this step</th><th>Received</th><th>Completed</th><th>Queued now</th></tr>${rows}`;
  const hottest = Math.max(...ex.rows.map((r) => r.share_percent));
  $("ex-shares").innerHTML = `<div class="dim note">Share of all requests received, on a fixed 0–100 % scale (rounded shares may not add up to 100 %)</div>` +
    ex.rows.map((r) => `<div class="share" data-partition="${r.partition}"><b>P${r.partition}</b><div class="track">` +
      `<div class="fill${r.share_percent === hottest && r.share_percent > 50 ? " hot" : ""}" style="width:${r.share_percent}%"></div></div>` +
      `<span class="pct">${r.share_percent} %</span></div>`).join("") +
    `<div class="scale"><span></span><div><span>0 %</span><span>50 %</span><span>100 %</span></div><span></span></div>`;
  const slash = (v) => v.join("/");
  $("ex-history").innerHTML = ex.history.length ? `<table class="evidence"><tr><th>step</th><th>load</th><th class="right">arrived</th><th class="right">completed</th><th class="right">queued (lag)</th></tr>` +
    ex.history.map((h, i) => `<tr><td class="right">${i + 1}</td><td>${esc(h.label)}</td><td class="right">${slash(h.arrivals)}</td>` +
      `<td class="right">${slash(h.completed)}</td><td class="right">${slash(h.queued)}</td></tr>`).join("") + "</table>"
    : `<div class="dim">Run ${ex.run + 1} starts with the next batch: a fresh topic and group.</div>`;
}

// Free mode
const num = (id) => Number($(id).value);
const hotKey = () => ($("f-hot").value === "" ? null : Number($("f-hot").value));
const control = (body) => ask("/api/free", body, "f-message");
$("f-start").onclick = () => control({ action: "start", partitions: num("f-partitions"), members: num("f-members"), capacity: num("f-capacity"), rate: num("f-rate"), hot_key: hotKey() });
$("f-stop").onclick = () => control({ action: "stop" });
$("f-traffic").onclick = () => control({ action: "traffic", rate: num("f-rate"), hot_key: hotKey() });
$("f-add").onclick = () => control({ action: "add_member" });
$("f-remove").onclick = () => control({ action: "remove_member" });
$("f-stall").onclick = () => control({ action: "stall", member: num("f-stall-member"), seconds: 5 });
$("f-grow-go").onclick = () => control({ action: "partitions", count: num("f-grow") });

function renderFree() {
  const f = free;
  const running = !!(f && f.running);
  for (const id of ["f-stop", "f-traffic", "f-add", "f-remove", "f-stall", "f-grow-go"]) $(id).disabled = busy || !running;
  $("f-start").disabled = busy;
  if (!running) {
    $("f-figures").innerHTML = "<p class='dim'>Start a topic and a group: keyed records at a rate, members that each process a fixed number a second. Then add a hot key, stall a member past max.poll.interval (3 s), or add partitions, and watch lag, rebalances and per-key order.</p>";
    $("f-members-list").innerHTML = "";
    $("f-violations").innerHTML = "";
    return;
  }
  const select = $("f-stall-member");
  const names = f.members.map((m, i) => `<option value="${i}">${esc(m.name)}</option>`).join("");
  if (select.dataset.names !== names) { select.innerHTML = names; select.dataset.names = names; }
  $("f-figures").innerHTML = `<p>${esc(f.topic)}: <b>${f.partitions}</b> partitions · ${f.rate} records/s` +
    (f.hot_key === null ? " uniform" : ` · 75 % to key-${String(f.hot_key).padStart(2, "0")}`) +
    ` · ${f.members.length} members × ${f.capacity}/s</p>` +
    `<p>produced <b>${f.produced}</b> · processed <b>${f.processed}</b> · rebalances <b id="f-rebalances">${f.rebalances}</b> · ` +
    `duplicates <b>${f.duplicates}</b> · <span class="${f.violations ? "bad" : ""}">order violations <b id="f-violation-count">${f.violations}</b></span>` +
    (f.keys_out_of_order ? ` (${f.keys_out_of_order} keys)` : "") + "</p>" +
    (f.error ? `<p class="bad">${esc(f.error)}</p>` : "");
  $("f-members-list").innerHTML = `<table class="evidence members-table"><tr><th>member</th><th>partitions</th><th class="right">processed</th><th>state</th></tr>` +
    f.members.map((m) => `<tr><td>${esc(m.name)}</td><td>${esc(m.partitions.join(",")) || "-"}</td><td class="right">${m.processed}</td>` +
      `<td>${m.stalled ? "<span class='stalled'>stalled</span>" : m.generation < 0 ? "joining" : "generation " + m.generation}</td></tr>`).join("") + "</table>";
  $("f-violations").innerHTML = f.shown.map((v) => `<div class="violation">${esc(v.key)}: ${esc(v.found)} before ${esc(v.expected)}` +
    (v.cause !== "-" ? ` · ${esc(v.cause)}` : "") + "</div>").join("");
}

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("state", (m) => {
    const state = JSON.parse(m.data);
    if (state.latest.exercise) exercise = state.latest.exercise;
    if (state.latest.free) free = state.latest.free;
    if (state.latest.broker) { exBroker.update(state.latest.broker); freeBroker.update(state.latest.broker); }
    renderExercise();
    renderFree();
  });
  source.addEventListener("exercise", (m) => { if (!busy) { exercise = JSON.parse(m.data); renderExercise(); } });
  source.addEventListener("free", (m) => { free = JSON.parse(m.data); renderFree(); });
  source.addEventListener("broker", (m) => { const v = JSON.parse(m.data); exBroker.update(v); freeBroker.update(v); });
}

renderExercise();
renderFree();
connect();
