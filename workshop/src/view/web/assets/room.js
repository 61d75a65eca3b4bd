// The room view of a lab run: the narration phase by phase (each question before its answer),
// the Reveal / Next phase control, the broker panel, and the store's log as it is written.
// Everything shown comes from the server's journal of lab events and its broker poller.
"use strict";

const $ = (id) => document.getElementById(id);
const broker = new BrokerPanel($("broker"));
broker.height = 92;

let run; // everything the journal told so far
let viewing = null; // a phase the trainer clicked back to, or null for the current one
let shownAnswer = null; // the phase whose answer was last scrolled to
let peeked = null; // the phase whose open question the trainer chose to show the broker for

function fresh() {
  return {
    lab: null, expected: "", phases: [], intro: [], waiting: null, progress: null,
    tail: [], violations: [], summary: null, checks: [], verdict: null, end: null, next: 0,
  };
}

function current() {
  return run.phases[run.phases.length - 1] || null;
}

// Lines written while a question is open stay hidden until its answer: the room predicts first.
function holding() {
  const phase = current();
  return phase !== null && phase.question !== null && !phase.answered;
}

function apply(e) {
  const seq = run.next++;
  const phase = current();
  const items = phase ? phase.items : run.intro;
  switch (e.event) {
    case "intro": run.lab = e.lab; run.expected = e.expected; break;
    case "phase":
      run.waiting = null;
      run.phases.push({ number: e.number, title: e.title, about: e.about, question: null, answered: false, items: [] });
      break;
    case "question": if (phase) phase.question = e.text; break;
    case "waiting": run.waiting = { at: seq, pause: e.pause }; break;
    case "answer":
      run.waiting = null;
      if (phase) phase.answered = true;
      for (const l of run.tail) l.held = false;
      for (const v of run.violations) v.held = false;
      break;
    case "text": case "table": case "lag": case "log": case "violations":
      items.push(e); break;
    case "progress": run.progress = e; break;
    case "done": if (run.progress && run.progress.id === e.id) run.progress = null; break;
    case "tail": {
      const held = holding();
      for (const line of e.lines) run.tail.push({ line, held });
      for (const v of e.violations) run.violations.push({ v, held });
      if (run.tail.length > 2000) run.tail.splice(0, run.tail.length - 2000);
      break;
    }
    case "summary": run.waiting = null; run.summary = e; break;
    case "check": run.waiting = null; run.checks.push(e.check); break;
    case "verdict": run.waiting = null; run.verdict = e; break;
    case "end": run.waiting = null; run.end = e; break;
    default: break; // live: the broker panel draws the broker itself
  }
}

function esc(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

function paragraphs(text) {
  return text.split("\n").map((l) => `<p>${esc(l)}</p>`).join("");
}

function table(t) {
  const head = t.columns.map(([name, align]) => `<th class="${align}">${esc(name)}</th>`).join("");
  const rows = t.rows.map((r) => "<tr>" + r.map((c, i) => `<td class="${t.columns[i][1]}">${esc(c)}</td>`).join("") + "</tr>").join("");
  return `<table class="evidence"><tr>${head}</tr>${rows}</table>`;
}

// A member by its client id, without the group's name in front (as the broker panel names it).
function member(r) {
  if (!r.client_id) return "-";
  return r.client_id.startsWith(r.group + "-") ? r.client_id.slice(r.group.length + 1) : r.client_id;
}

// kafka-consumer-groups.sh's columns; one topic is named once above them, so the table fits the
// narration's half of the screen.
function lagTable(rows) {
  const oneTopic = rows.length > 0 && rows.every((r) => r.topic === rows[0].topic);
  const t = {
    columns: [["TOPIC", "left"], ["PARTITION", "right"], ["CURRENT-OFFSET", "right"], ["LOG-END-OFFSET", "right"], ["LAG", "right"], ["CONSUMER", "left"]],
    rows: rows.map((r) => [r.topic, String(r.partition), r.current_offset === null ? "-" : String(r.current_offset),
      r.log_end_offset === null ? "-" : String(r.log_end_offset),
      r.current_offset === null || r.log_end_offset === null ? "-" : String(Math.max(0, r.log_end_offset - r.current_offset)),
      member(r)]),
  };
  // The members' own count of what they processed past the committed offset, where the lab has it.
  if (rows.some((r) => r.processed_uncommitted !== undefined)) {
    t.columns.push(["PROCESSED", "right"]);
    t.rows.forEach((cells, i) => cells.push(rows[i].processed_uncommitted === undefined ? "-" : String(rows[i].processed_uncommitted)));
  }
  if (!oneTopic) return table(t);
  t.columns = t.columns.slice(1);
  t.rows = t.rows.map((r) => r.slice(1));
  return `<div class="dim">TOPIC ${esc(rows[0].topic)}</div>` + table(t);
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

function item(e) {
  switch (e.event) {
    case "text": return paragraphs(e.text);
    case "table": return table(e.table);
    case "lag": return lagTable(e.rows);
    case "log": return `<div class="log">${e.lines.map(logLine).join("")}</div>`;
    case "violations":
      return `<div><b class="bad">${e.total} violation${e.total === 1 ? "" : "s"}</b>${e.shown.map(violation).join("")}</div>`;
    default: return "";
  }
}

function renderStory() {
  const el = $("story");
  const pills = run.phases.map((p, i) => {
    const cls = (viewing === null ? i === run.phases.length - 1 : i === viewing) ? "now" : "done";
    return `<span class="${cls}" data-phase="${i}">${p.number}. ${esc(p.title)}</span>`;
  }).join("");
  let body = "";
  const showEnd = viewing === null && (run.summary || run.verdict);
  if (showEnd) {
    if (run.summary) {
      const list = (title, lines) => lines.length ? `<h2>${title}</h2>` + lines.map((l) => `<p>${esc(l)}</p>`).join("") : "";
      body += `<div class="phase-title">Summary</div>` + list("What happened", run.summary.happened) +
        list("Why", run.summary.why) + list("What an engineer can do", run.summary.what_to_do);
    }
    if (run.checks.length) {
      body += "<h2>Checks</h2><div class='checks'>" + run.checks.map((c) =>
        `<div><span class="${c.ok ? "ok" : "bad"}">${c.ok ? "✔" : "✘"}</span> <b>${esc(c.name)}</b>: ${esc(c.detail)}</div>`).join("") + "</div>";
    }
    if (run.verdict) {
      const v = run.verdict;
      body += `<div class="verdict ${v.shown ? "ok" : "bad"}" id="verdict">${v.shown ? "Shown" : "Not shown"}: ${esc(v.expected)}` +
        (v.failed.length ? ` <span class="bad">(failed: ${esc(v.failed.join(", "))})</span>` : "") + "</div>";
    }
  } else {
    const phase = viewing === null ? current() : run.phases[viewing];
    if (!phase) {
      body = `<div class="phase-title">${esc(run.lab || "")}</div><p class="about">Expected: ${esc(run.expected)}</p>` +
        run.intro.map(item).join("");
    } else {
      body = `<div class="phase-title" id="phase-title">${phase.number}. ${esc(phase.title)}</div>` +
        (phase.about ? `<p class="about">${esc(phase.about)}</p>` : "") +
        (phase.question ? `<div class="question" id="question">${esc(phase.question)}</div>` : "") +
        `<div class="answer" id="answer">` + (phase.answered ? phase.items.map(item).join("")
          : phase.items.map(item).join("") + (run.waiting && run.waiting.pause === "answer" ? `<p class="hint">Predict, then Reveal.</p>` : "")) + "</div>";
    }
  }
  el.innerHTML = `<div id="phases">${pills}</div>` + body;
  // Once an answer is revealed, the question goes to the top: the evidence follows it.
  const phase = current();
  if (viewing === null && phase && phase.answered && shownAnswer !== phase.number && $("question")) {
    shownAnswer = phase.number;
    el.scrollTop = $("question").offsetTop - el.offsetTop - 8;
  }
}

function renderTail() {
  const shown = run.tail.filter((l) => !l.held);
  const held = run.tail.length - shown.length;
  const violations = run.violations.filter((v) => !v.held);
  const el = $("tail");
  const old = $("log");
  const stick = !old || old.scrollTop + old.clientHeight >= old.scrollHeight - 30;
  if (!run.tail.length && !run.violations.length) {
    el.innerHTML = "<h2>The store's log</h2><div class='dim'>Nothing written yet.</div>";
    return;
  }
  el.innerHTML = `<h2>The store's log · ${shown.length} lines · ` +
    `<span class="${violations.length ? "bad" : ""}" id="violation-count">${violations.length} violation${violations.length === 1 ? "" : "s"}</span></h2>` +
    (violations.length ? `<div id="violations">${violations.slice(0, 3).map((x) => violation(x.v)).join("")}` +
      (violations.length > 3 ? `<div class="dim">… and ${violations.length - 3} more</div>` : "") + "</div>" : "") +
    `<div class="log" id="log">${shown.slice(-150).map((x) => logLine(x.line)).join("")}</div>` +
    (held ? `<div class="hint dim">${held} line${held === 1 ? "" : "s"} written since the question: shown with the answer.</div>` : "");
  const log = $("log");
  if (log && stick) log.scrollTop = log.scrollHeight;
  else if (log && old) log.scrollTop = old.scrollTop;
}

function renderHeader() {
  $("lab").textContent = run.lab ? `workshop ${run.lab}` : "workshop";
  const phase = current();
  $("where").textContent = phase ? `phase ${phase.number}: ${phase.title}` : (run.expected || "");
  const status = $("status");
  status.className = "status";
  if (run.end) {
    status.textContent = run.end.error ? `stopped: ${run.end.error}` : `done · exit code ${run.end.exit_code}`;
    status.className = "status " + (run.end.error || run.end.exit_code ? "ended-bad" : "ended-ok");
  } else if (run.waiting) {
    status.textContent = run.waiting.pause === "answer" ? "waiting: predict, then Reveal" : "waiting for the next phase";
    status.className = "status waiting";
  } else if (run.progress) {
    status.textContent = `${run.progress.label} ${run.progress.done}/${run.progress.total}`;
  } else {
    status.textContent = run.verdict ? "" : "running…";
  }
  $("reveal").disabled = !(run.waiting && run.waiting.pause === "answer");
  $("next").disabled = !(run.waiting && run.waiting.pause === "next");
}

// The broker's figures answer most questions (how many records, which partition lags): while
// one is open they are blurred, unless the trainer asks to see them.
function renderHeld() {
  const phase = current();
  $("broker-panel").classList.toggle("held", holding() && peeked !== phase.number);
}

function render() {
  renderHeader();
  renderStory();
  renderTail();
  renderHeld();
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
  peeked = current() && current().number;
  renderHeld();
});
$("reveal").addEventListener("click", () => release("answer"));
$("next").addEventListener("click", () => release("next"));
// A presenter's clicker sends Page Down or the arrow keys; a keyboard has Space and Enter.
document.addEventListener("keydown", (e) => {
  if (!["Enter", " ", "PageDown", "ArrowRight"].includes(e.key) || !run.waiting) return;
  e.preventDefault();
  release(run.waiting.pause);
});
$("story").addEventListener("click", (e) => {
  const i = e.target.dataset && e.target.dataset.phase;
  if (i === undefined) return;
  viewing = Number(i) === run.phases.length - 1 ? null : Number(i);
  renderStory();
});

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
    if (state.latest.broker) broker.update(state.latest.broker);
    render();
  });
  source.addEventListener("lab", (m) => { apply(JSON.parse(m.data)); soon(); });
  source.addEventListener("broker", (m) => broker.update(JSON.parse(m.data)));
  source.onerror = () => { $("status").textContent = "reconnecting…"; };
}

run = fresh();
connect();
