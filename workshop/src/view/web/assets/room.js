// The room view of a lab run: the narration phase by phase (each question before its answer),
// the Reveal / Next phase control, the broker panel, and the log as it is written.
// Everything shown comes from the server's journal of lab events and its broker poller, and
// everything shown belongs to the phase on screen: its question, the topics and groups the lab
// made in it, the lag the lab measured in it, the log lines written during it.
"use strict";

const $ = (id) => document.getElementById(id);
const broker = new BrokerPanel($("broker"));

let run; // everything the journal told so far
let viewing = null; // a phase the trainer clicked back to, or null for the current one
let peeked = null; // the phase whose open question the trainer chose to show the broker for

function fresh() {
  return {
    lab: null, expected: "", intro: freshPhase(0, "", ""), phases: [], waiting: null, progress: null,
    tails: false, // whether the lab follows a live log (Tail events)
    // Whether the lab did its work before telling it (rebalance runs, then narrates): what it
    // made then holds the run's end state, drawn only as the lab measured it.
    workedFirst: false,
    summary: null, checks: [], verdict: null, end: null, next: 0,
  };
}

function freshPhase(number, title, about) {
  return {
    number, title, about, question: null, skipped: null, answered: false, items: [],
    // The log written during this phase, and the violations found in it.
    tail: [], violations: [],
    // The last lag the lab measured in this phase, by topic (it drew or printed it).
    measured: {},
  };
}

function current() {
  return run.phases[run.phases.length - 1] || run.intro;
}

function shown() {
  return viewing === null ? current() : run.phases[viewing];
}

// Lines written while a question is open stay hidden until its answer: the room predicts first.
function holding(phase) {
  return phase.question !== null && !phase.answered;
}

// A lag table as the broker panel draws it: one topic's partitions, as the lab measured them.
function measure(phase, rows, label) {
  const topics = new Map();
  for (const r of rows) {
    if (!topics.has(r.topic)) topics.set(r.topic, []);
    topics.get(r.topic).push(r);
  }
  for (const [topic, list] of topics) {
    const n = Math.max(...list.map((r) => r.partition)) + 1;
    const m = {
      topic, group: list[0].group, label, ends: Array(n).fill(null), committed: Array(n).fill(null),
      owners: Array(n).fill(null).map(() => [null, null]),
    };
    for (const r of list) {
      m.ends[r.partition] = r.log_end_offset;
      m.committed[r.partition] = r.current_offset;
      m.owners[r.partition] = [r.consumer_id, r.client_id];
    }
    phase.measured[topic] = m;
  }
}

function apply(e) {
  const seq = run.next++;
  const phase = current();
  switch (e.event) {
    case "intro": run.lab = e.lab; run.expected = e.expected; break;
    case "phase":
      run.waiting = null;
      run.phases.push(freshPhase(e.number, e.title, e.about));
      break;
    case "question": phase.question = e.text; break;
    case "skipped": phase.skipped = e.reason; break;
    case "waiting": run.waiting = { at: seq, pause: e.pause }; break;
    case "answer":
      run.waiting = null;
      phase.answered = true;
      for (const l of phase.tail) l.held = false;
      for (const v of phase.violations) v.held = false;
      break;
    case "log":
      phase.items.push(e);
      // A lab that does not follow a live log fills the log panel with the lines it shows.
      if (!run.tails) for (const line of e.lines) phase.tail.push({ line, held: holding(phase) });
      break;
    case "lag": phase.items.push(e); measure(phase, e.rows, `as the lab measured it in phase ${phase.number}`); break;
    case "live": if (!run.phases.length) run.workedFirst = true; if (e.rows.length) measure(phase, e.rows, `as the lab measures it: ${e.label}`); break;
    case "text": case "table": case "violations": case "panel": phase.items.push(e); break;
    case "progress": run.progress = e; if (!run.phases.length) run.workedFirst = true; break;
    case "done": if (run.progress && run.progress.id === e.id) run.progress = null; break;
    case "tail": {
      const held = holding(phase);
      if (!run.tails) for (const p of [run.intro, ...run.phases]) p.tail = [];
      run.tails = true;
      for (const line of e.lines) phase.tail.push({ line, held });
      for (const v of e.violations) phase.violations.push({ v, held });
      if (phase.tail.length > 2000) phase.tail.splice(0, phase.tail.length - 2000);
      break;
    }
    case "summary": run.waiting = null; run.summary = e; break;
    case "check": run.waiting = null; run.checks.push(e.check); break;
    case "verdict": run.waiting = null; run.verdict = e; break;
    case "end": run.waiting = null; run.end = e; break;
    default: break;
  }
}

function paragraphs(text) {
  return text.split("\n").map((l) => `<p>${esc(l)}</p>`).join("");
}

function table(t, id) {
  const head = t.columns.map(([name, align]) => `<th class="${align}">${esc(name)}</th>`).join("");
  const rows = t.rows.map((r) => "<tr>" + r.map((c, i) => `<td class="${t.columns[i][1]}">${esc(c)}</td>`).join("") + "</tr>").join("");
  return `<table class="evidence"${id ? ` id="${id}"` : ""}><tr>${head}</tr>${rows}</table>`;
}

// kafka-consumer-groups.sh's columns, with the members named as the terminal names them; one
// topic is named once above them, so the table fits its half of the screen.
function lagTable(rows) {
  const names = shortNames(rows.map((r) => [r.consumer_id, r.client_id]));
  const oneTopic = rows.length > 0 && rows.every((r) => r.topic === rows[0].topic);
  const lag = (r) => (r.current_offset === null || r.log_end_offset === null ? "-" : String(Math.max(0, r.log_end_offset - r.current_offset)));
  const t = {
    columns: [["TOPIC", "left"], ["PARTITION", "right"], ["CURRENT-OFFSET", "right"], ["LOG-END-OFFSET", "right"], ["LAG", "right"], ["CONSUMER", "left"]],
    rows: rows.map((r) => [r.topic, String(r.partition), r.current_offset === null ? "-" : String(r.current_offset),
      r.log_end_offset === null ? "-" : String(r.log_end_offset), lag(r), names.get(r.consumer_id) || "-"]),
  };
  // The members' own count of what they processed past the committed offset, where the lab has it.
  if (rows.some((r) => r.processed_uncommitted !== undefined)) {
    t.columns.push(["PROCESSED", "right"]);
    t.rows.forEach((cells, i) => cells.push(rows[i].processed_uncommitted === undefined ? "-" : String(rows[i].processed_uncommitted)));
  }
  if (!oneTopic) return table(t, "lag");
  t.columns = t.columns.slice(1);
  t.rows = t.rows.map((r) => r.slice(1));
  return `<div class="dim">TOPIC ${esc(rows[0].topic)}</div>` + table(t, "lag");
}

function logLine(l) {
  const cls = { error: "error", warn: "warn", note: "note", info: "" }[l.level];
  const label = { error: "ERROR", warn: "WARN ", note: "-----", info: "INFO " }[l.level];
  const at = l.at ? `${esc(l.at)}  ` : "";
  const source = l.source ? `${esc(l.source)}  ` : "";
  return `<div class="${cls}">${at}${label} ${source}${esc(l.text)}</div>`;
}

function violation(v) {
  const at = v.at ? `${esc(v.at)} · ` : "";
  return `<div class="violation">${at}${esc(v.key)}: ${esc(v.found)} before ${esc(v.expected)}` +
    (v.cause && v.cause !== "-" ? ` · ${esc(v.cause)}` : "") + "</div>";
}

// A lab's panel: its key figures large, then one bar per member, tenant or key, each named.
function panel(p) {
  const figures = p.figures.map((f) =>
    `<div class="figure"><b class="${f.bad ? "bad" : ""}">${esc(f.value)}</b><span>${esc(f.label)}</span></div>`).join("");
  const most = Math.max(1, ...p.bars.map((b) => b.value));
  const bars = p.bars.map((b) =>
    `<div class="share${b.bad ? " bad" : ""}"><span class="who">${esc(b.label)}</span>` +
    `<span class="track"><i style="width:${(100 * b.value) / most}%"></i></span><b>${fmt(b.value)}</b>` +
    `<span class="note">${esc(b.note)}</span></div>`).join("");
  return `<div class="lab-panel" data-title="${esc(p.title)}"><h2>${esc(p.title)}</h2>` +
    (figures ? `<div class="big-figures">${figures}</div>` : "") + (bars ? `<div class="shares">${bars}</div>` : "") + "</div>";
}

// The phase's panels, each as last measured in it, above the rest of its answer.
function panels(phase) {
  const last = new Map();
  for (const e of phase.items) if (e.event === "panel") last.set(e.panel.title, e.panel);
  // Several (one per run the phase compares) stand side by side, so the answer still starts on screen.
  return last.size ? `<div id="panels" class="${last.size > 1 ? "several" : ""}">${[...last.values()].map(panel).join("")}</div>` : "";
}

function item(e) {
  switch (e.event) {
    case "text": return paragraphs(e.text);
    case "table": return table(e.table);
    case "lag": return lagTable(e.rows);
    case "log": return `<div class="log">${e.lines.map(logLine).join("")}</div>`;
    case "violations":
      return `<div class="violations-shown"><b class="bad">${e.total} violation${e.total === 1 ? "" : "s"}</b>${e.shown.map(violation).join("")}</div>`;
    default: return "";
  }
}

function pills() {
  const now = shown();
  return run.phases.map((p, i) =>
    `<span class="${p === now ? "now" : ""}" data-phase="${i}" title="${esc(p.title)}">${p.number}</span>`).join("");
}

function endView() {
  let body = "";
  if (run.verdict) {
    const v = run.verdict;
    body += `<div class="verdict ${v.shown ? "ok" : "bad"}" id="verdict">${v.shown ? "Shown" : "Not shown"}: ${esc(v.expected)}` +
      (v.failed.length ? ` <span class="bad">(failed: ${esc(v.failed.join(", "))})</span>` : "") + "</div>";
  }
  if (run.checks.length) {
    body += "<div class='checks' id='checks'>" + run.checks.map((c) =>
      `<div><span class="${c.skipped ? "dim" : c.ok ? "ok" : "bad"}">${c.skipped ? "–" : c.ok ? "✔" : "✘"}</span> <b>${esc(c.name)}</b>: ${esc(c.detail)}</div>`).join("") + "</div>";
  }
  if (run.summary) {
    const list = (title, lines) => lines.length ? `<h2>${title}</h2>` + lines.map((l) => `<p>${esc(l)}</p>`).join("") : "";
    body += `<div id="summary">` + list("What happened", run.summary.happened) + list("Why", run.summary.why) +
      list("What an engineer can do", run.summary.what_to_do) + "</div>";
  }
  return { head: `<div class="phase-title" id="phase-title">${run.verdict ? "Verdict" : "Summary"}</div>`, body };
}

function phaseView(phase) {
  if (phase.number === 0) {
    return {
      head: `<div class="phase-title" id="phase-title">${esc(run.lab || "")}</div>`,
      body: `<p class="about">Expected: ${esc(run.expected)}</p>` + phase.items.map(item).join(""),
    };
  }
  const head = `<div class="phase-title" id="phase-title">${phase.number}. ${esc(phase.title)}</div>` +
    (phase.question ? `<div class="question" id="question">${esc(phase.question)}</div>` : "") +
    (phase.skipped ? `<div class="question skipped" id="skipped">Skipped: ${esc(phase.skipped)}</div>` : "");
  const waiting = viewing === null && run.waiting && run.waiting.pause === "answer";
  const about = phase.about ? `<p class="about">${esc(phase.about)}</p>` : "";
  // Once the answer is out, it comes first: what the phase was about follows it.
  const body = phase.answered
    ? panels(phase) + `<div class="answer" id="answer">${phase.items.map(item).join("")}</div>` + (about ? `<details><summary>About this phase</summary>${about}</details>` : "")
    : about + `<div class="answer" id="answer">${phase.items.map(item).join("")}` +
      (waiting ? `<p class="hint">Predict, then Reveal.</p>` : "") + "</div>";
  return { head, body };
}

function renderStory() {
  const atEnd = viewing === null && (run.summary || run.verdict);
  const view = atEnd ? endView() : phaseView(shown());
  $("phases").innerHTML = pills();
  const key = atEnd ? "end" : `${shown().number}/${shown().answered}`;
  $("story-head").innerHTML = view.head;
  const body = $("story-body");
  // The evidence of a newly opened answer starts at its top; a redraw keeps the trainer's place.
  const keep = body.dataset.key === key ? body.scrollTop : 0;
  body.innerHTML = view.body;
  body.dataset.key = key;
  body.scrollTop = keep;
}

function renderTail() {
  const phase = shown();
  const lines = phase.tail.filter((l) => !l.held);
  const held = phase.tail.length - lines.length;
  // The violations the lab counts in this phase's evidence, once told; else those found in
  // the lines written during it.
  const told = phase.items.filter((e) => e.event === "violations").pop();
  const violations = told ? told.shown.map((v) => ({ v })) : phase.violations.filter((v) => !v.held);
  const total = told ? told.total : violations.length;
  const el = $("tail");
  const old = $("log");
  const stick = !old || old.scrollTop + old.clientHeight >= old.scrollHeight - 30;
  const title = phase.number ? `Log · phase ${phase.number}` : "Log";
  // A phase that wrote no log gives the broker panel the log's room (hot-tenant's 8 members).
  $("main").classList.toggle("quiet", !phase.tail.length);
  if (!phase.tail.length) {
    el.innerHTML = `<h2>${title}</h2><div class="dim" id="log-empty">No log line written in this phase.</div>`;
    return;
  }
  const count = run.tails || told ?
    ` · <span class="${total ? "bad" : ""}" id="violation-count">${total} violation${total === 1 ? "" : "s"}</span>` : "";
  el.innerHTML = `<h2>${title} · <span id="log-count">${lines.length}</span> lines${count}</h2>` +
    (violations.length ? `<div id="violations">${violations.slice(0, 2).map((x) => violation(x.v)).join("")}` +
      (total > 2 ? `<div class="dim">… and ${total - 2} more</div>` : "") + "</div>" : "") +
    `<div class="log" id="log">${lines.slice(-150).map((x) => logLine(x.line)).join("")}</div>` +
    (held ? `<div class="hint dim">${held} line${held === 1 ? "" : "s"} written since the question: shown with the answer.</div>` : "");
  const log = $("log");
  if (log && stick) log.scrollTop = log.scrollHeight;
  else if (log && old) log.scrollTop = old.scrollTop;
}

function renderHeader() {
  $("lab").textContent = run.lab ? run.lab : "workshop";
  const status = $("status");
  status.className = "status";
  if (run.end) {
    status.textContent = run.end.error ? `stopped: ${run.end.error}` : `done · exit ${run.end.exit_code}`;
    status.className = "status " + (run.end.error || run.end.exit_code ? "ended-bad" : "ended-ok");
  } else if (run.waiting) {
    status.textContent = run.waiting.pause === "answer" ? "predict, then Reveal" : "Next when ready";
    status.className = "status waiting";
  } else if (run.progress) {
    status.textContent = `${run.progress.label} ${run.progress.done}/${run.progress.total}`;
  } else {
    status.textContent = run.verdict ? "" : "running…";
  }
  $("reveal").disabled = !(run.waiting && run.waiting.pause === "answer");
  $("next").disabled = !(run.waiting && run.waiting.pause === "next");
}

// The broker panel shows the phase on screen: the topics the lab made in it, or that a group
// it named reads (a phase that made none shows the last phase's that did), and the lag the lab
// measured in it once its answer is out.
// Everything the narration has said up to `phase` (what is on screen of it included).
function toldSoFar(phase) {
  const upTo = [run.intro, ...run.phases.slice(0, run.phases.indexOf(phase) + 1)];
  const parts = [];
  for (const p of upTo) {
    parts.push(p.title, p.about, p.question || "");
    for (const e of p.items) {
      if (e.event === "text") parts.push(e.text);
      if (e.event === "table") parts.push(e.table.rows.flat().join(" "), e.table.columns.map((c) => c[0]).join(" "));
      if (e.event === "lag") parts.push(e.rows.map((r) => r.topic).join(" "));
      if (e.event === "log") parts.push(e.lines.map((l) => l.text).join(" "));
    }
  }
  return parts.join("\n");
}

// Whether `text` names `topic` itself, not a longer name it begins (payments, payments-applied).
function mentions(text, topic) {
  const quoted = topic.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^\\w.-])${quoted}(?![\\w-]|\\.\\w)`).test(text);
}

function renderBroker() {
  const phase = shown();
  const topics = (broker.view && broker.view.topics) || [];
  const groups = (broker.view && broker.view.groups) || [];
  const of = (k) => {
    const mine = new Set(groups.filter((g) => g.phase === k).map((g) => g.name));
    return topics.filter((t) => t.phase === k || t.consumers.some((c) => mine.has(c.group))).map((t) => t.name);
  };
  // Earlier topics, where the narration so far has named them: a lab that made its topics
  // before telling (rebalance runs first, then narrates) shows each from the phase that
  // brings it up.
  const told = toldSoFar(phase);
  const named = topics.filter((t) => t.phase < phase.number && mentions(told, t.name)).map((t) => t.name);
  let names = [...new Set([...of(phase.number), ...named])];
  // What a lab that worked first made before telling is drawn as it measured it, in this
  // phase or an earlier one once told, never live: live is the end of the whole run.
  const answered = [...run.phases.slice(0, run.phases.indexOf(phase)), ...(phase.answered ? [phase] : [])];
  const before = (name) => run.workedFirst && phase.number > 0 && (topics.find((t) => t.name === name) || {}).phase === 0;
  const measuredSoFar = (name) => answered.map((p) => p.measured[name]).filter(Boolean).pop() || null;
  names = names.filter((name) => !before(name) || measuredSoFar(name));
  const allowed = new Set(names);
  broker.only = (t) => allowed.has(t.name);
  broker.empty = run.workedFirst && phase.number > 0 ? "The lab ran before telling: its topics show as it measured them, with the answer that tells it." : "No topic yet in this phase.";
  const measured = Object.values(phase.measured).filter((m) => allowed.has(m.topic));
  const earlier = names.filter(before).map(measuredSoFar);
  broker.measured = phase.answered || phase.number === 0 ? measured[measured.length - 1] || earlier[earlier.length - 1] || null : earlier[earlier.length - 1] || null;
  $("broker-phase").textContent = "";
  broker.render();
  broker.fit($("broker-panel"), () => $("broker-phase").offsetHeight + $("broker").offsetHeight);
  $("broker-panel").classList.toggle("held", viewing === null && holding(phase) && peeked !== phase.number);
}

// A lab that never touches a broker nor writes a log (rehash) gives the story the whole screen;
// a story whose evidence is wider than its column takes more of the screen from the panels.
function renderLayout() {
  const main = $("main");
  const brokerless = !((broker.view && broker.view.topics.length) || run.intro.tail.length || run.phases.some((p) => p.tail.length));
  main.classList.toggle("story-only", brokerless);
  const body = $("story-body");
  if (!brokerless && !main.classList.contains("wide") && body.scrollWidth > body.clientWidth + 1) {
    main.classList.add("wide");
  }
  // Still wider: its tables' cells wrap.
  if (body.scrollWidth > body.clientWidth + 1) main.classList.add("tight");
}

function render() {
  renderHeader();
  renderStory();
  renderTail();
  renderBroker();
  renderLayout();
}

async function release(pause) {
  if (!run.waiting || run.waiting.pause !== pause) return;
  const at = run.waiting.at;
  $("reveal").disabled = true;
  $("next").disabled = true;
  viewing = null;
  const answer = await fetch("/api/gate", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ release: pause, at }),
  }).catch((e) => ({ ok: false, json: async () => ({ error: String(e) }) }));
  if (!answer.ok) {
    const why = await answer.json().catch(() => ({ error: "no answer" }));
    $("status").textContent = why.error;
  }
}

$("peek").addEventListener("click", () => {
  peeked = current().number;
  renderBroker();
});
$("reveal").addEventListener("click", () => release("answer"));
$("next").addEventListener("click", () => release("next"));
// A presenter's clicker sends Page Down or the arrow keys; a keyboard has Space and Enter.
document.addEventListener("keydown", (e) => {
  if (!["Enter", " ", "PageDown", "ArrowRight"].includes(e.key) || !run.waiting) return;
  e.preventDefault();
  release(run.waiting.pause);
});
$("phases").addEventListener("click", (e) => {
  const i = e.target.dataset && e.target.dataset.phase;
  if (i === undefined) return;
  viewing = Number(i) === run.phases.length - 1 ? null : Number(i);
  render();
});
window.addEventListener("resize", render);

let scheduled = false;
function soon() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => { scheduled = false; render(); });
}

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("state", (m) => {
    const state = JSON.parse(m.data);
    run = fresh();
    for (const e of state.journal) apply(e);
    if (state.latest.broker) broker.view = state.latest.broker;
    render();
  });
  source.addEventListener("lab", (m) => { apply(JSON.parse(m.data)); soon(); });
  source.addEventListener("broker", (m) => { broker.update(JSON.parse(m.data)); renderBroker(); });
  source.onerror = () => { $("status").textContent = "reconnecting…"; };
}

run = fresh();
connect();
