// Every lab's room view in Chromium, phase by phase, at 1280x720 and 1024x768 at once (two pages
// on one run), against the lab's own journal and its JSON figures for the same seed.
//
// At each wait of the lab (a question open, an answer shown) and at the end, on both pages:
// - the moment: the phase on screen is the journal's last, with its question; the broker panel
//   offers no topic made after it; the log panel holds this phase's lines and violations only;
//   where the lab measured lag in this phase, the bars draw that measurement;
// - the viewport: the phase's title and question, then the start of its answer, then the verdict
//   are on screen without scrolling; nothing is cut at the side; no visible text under 18 px;
// - the figures: the verdict is the JSON's; per lab, the figures the issue named (partitions'
//   violations and lag per phase, hot-tenant's member names, rebalance's and migrate's topics).
// Screenshots of every answer and of the verdict go to ARTIFACTS_DIR.
import { spawnSync } from "node:child_process";
import { join } from "node:path";

export const SIZES = [{ width: 1280, height: 720 }, { width: 1024, height: 768 }];
// A dark room at one size, a light one at the other.
const SCHEMES = ["dark", "light"];
export const LABS = ["rehash", "partitions", "hot-tenant", "idempotence", "rebalance", "migrate", "routing"];
export const SEED = "7";

// What the page shows, read in the page: the moment and the layout.
export function read() {
  const $ = (id) => document.getElementById(id);
  const box = (el) => el && el.getBoundingClientRect();
  const inView = (el, margin = 0) => {
    const b = box(el);
    return !!b && b.top >= 0 && b.top + Math.min(b.height, margin || b.height) <= innerHeight + 0.5 && b.left >= 0 && b.right <= innerWidth + 0.5;
  };
  // Elements cut at the side: wider content than their box, where that box hides or scrolls it.
  const clipped = [];
  for (const el of document.querySelectorAll("body *")) {
    const style = getComputedStyle(el);
    if (style.display === "none" || el.closest("details:not([open])") && el.tagName !== "SUMMARY") continue;
    if (el.scrollWidth > el.clientWidth + 1 && style.overflowX !== "visible") {
      clipped.push(`${el.tagName.toLowerCase()}#${el.id}.${el.className} ${el.scrollWidth}>${el.clientWidth}`);
    }
    if (style.textOverflow === "ellipsis" && el.scrollWidth > el.clientWidth) clipped.push(`ellipsis ${el.id}`);
  }
  if (document.documentElement.scrollWidth > innerWidth) clipped.push(`page ${document.documentElement.scrollWidth}>${innerWidth}`);
  // Visible text smaller than 18 px.
  const small = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) continue;
    const el = node.parentElement;
    const b = box(el);
    if (!b || b.width === 0 || b.height === 0 || b.bottom < 0 || b.top > innerHeight) continue;
    if (el.closest("details:not([open])") && !el.closest("summary")) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < 18) small.push(`${size}px "${node.textContent.trim().slice(0, 30)}"`);
  }
  const answer = $("answer");
  return {
    title: $("phase-title") && $("phase-title").textContent,
    question: $("question") && $("question").textContent,
    titleInView: inView($("phase-title")),
    questionInView: !$("question") || inView($("question")),
    answerStartInView: !answer || !answer.firstElementChild || inView(answer.firstElementChild, 40),
    verdict: $("verdict") && $("verdict").textContent,
    verdictInView: inView($("verdict")),
    topic: $("topic-name") && $("topic-name").textContent,
    offered: [...document.querySelectorAll("#broker #topic-pick option")].map((o) => o.value).filter(Boolean),
    when: $("broker-when") && $("broker-when").textContent,
    lagMax: $("lag-max") && Number($("lag-max").textContent.replace(/,/g, "")),
    lagTotal: $("lag-total") && Number($("lag-total").textContent.replace(/,/g, "")),
    logCount: $("log-count") ? Number($("log-count").textContent) : 0,
    violations: $("violation-count") ? parseInt($("violation-count").textContent, 10) : null,
    lagNames: [...document.querySelectorAll("#lag tr")].slice(1).map((tr) => [...tr.children].map((td) => td.textContent)),
    chips: [...document.querySelectorAll("#members .chip")].map((c) => c.textContent),
    // Member chips the broker panel cuts at its bottom.
    chipsCut: $("broker-panel") ? [...document.querySelectorAll("#members .chip")].filter((c) => box(c).bottom > box($("broker-panel")).bottom + 0.5).map((c) => c.textContent) : [],
    held: !!$("broker-panel") && $("broker-panel").classList.contains("held"),
    panels: [...document.querySelectorAll(".lab-panel")].map((p) => ({
      title: p.dataset.title,
      figures: [...p.querySelectorAll(".figure")].map((f) => [f.querySelector("span").textContent, f.querySelector("b").textContent]),
      bars: [...p.querySelectorAll(".share")].map((b) => [b.querySelector(".who").textContent, Number(b.querySelector("b").textContent.replace(/,/g, "")),
        b.querySelector(".note").textContent]),
      figuresInView: inView(p.querySelector(".big-figures") || p.querySelector("h2")),
    })),
    clipped, small,
  };
}

// The journal's view of the moment: the last phase, what it made, logged and measured. Lines
// written while a question is open wait for its answer; a lab that follows a live log (tail)
// fills the log panel with it, any other with the log lines it shows.
function moment(state) {
  const tails = state.journal.some((e) => e.event === "tail");
  const phases = [];
  const fresh = (number, title) => ({ number, title, question: null, answered: false, lines: [], found: [], told: null, lags: [], panels: new Map() });
  let phase = fresh(0, "");
  for (const e of state.journal) {
    const held = phase.question !== null && !phase.answered;
    if (e.event === "phase") { phases.push(phase); phase = fresh(e.number, e.title); }
    if (e.event === "question") phase.question = e.text;
    if (e.event === "answer") { phase.answered = true; phase.lines = phase.lines.map(() => false); phase.found = phase.found.map(() => false); }
    if (e.event === "tail") { phase.lines.push(...e.lines.map(() => held)); phase.found.push(...e.violations.map(() => held)); }
    if (e.event === "log" && !tails) phase.lines.push(...e.lines.map(() => held));
    if (e.event === "violations") phase.told = e.total;
    if (e.event === "lag") phase.lags.push(e.rows);
    if (e.event === "panel") phase.panels.set(e.panel.title, e.panel);
  }
  phases.push(phase);
  for (const p of phases) {
    p.tail = p.lines.slice(-2000).filter((h) => !h).length;
    p.violations = p.told !== null ? p.told : p.found.filter((h) => !h).length;
  }
  const end = state.journal.find((e) => e.event === "verdict");
  const summary = state.journal.find((e) => e.event === "summary");
  const told = JSON.stringify(state.journal.filter((e) => e.event !== "tail" && e.event !== "live"));
  return { phase, phases, told, verdict: end || null, summary: summary || null, broker: state.latest.broker || { topics: [], groups: [] } };
}

function figures(binary, lab) {
  const run = spawnSync(binary, [lab, "--json", "--seed", SEED], { encoding: "utf8", input: "", maxBuffer: 64 << 20 });
  if (run.status !== 0 && run.status !== 1) throw new Error(`${lab} --json exited ${run.status}: ${run.stderr}`);
  return JSON.parse(run.stdout);
}

// Checks one page at one moment; returns what failed, one line each.
function check(lab, size, seen, m, json) {
  const bad = [];
  const at = `${lab} ${size.width}x${size.height} phase ${m.phase.number}${m.phase.answered ? " (answer)" : ""}`;
  const want = (ok, what) => { if (!ok) bad.push(`${at}: ${what}`); };
  if (m.verdict) {
    want(seen.verdict && seen.verdict.startsWith(json.shown ? "Shown" : "Not shown") && seen.verdict.includes(json.expected),
      `the verdict is the JSON's (${json.shown}: ${json.expected}), page: ${seen.verdict}`);
    want(seen.verdictInView, "the verdict is on screen");
  } else if (m.summary) {
    want(seen.title === "Summary", `the summary (${seen.title})`);
  } else if (m.phase.number > 0) {
    want(seen.title === `${m.phase.number}. ${m.phase.title}`, `the phase title (${seen.title})`);
    want(!m.phase.question || seen.question === m.phase.question, `the question (${seen.question})`);
    want(seen.titleInView && seen.questionInView, "the title and the question are on screen");
    want(!m.phase.answered || seen.answerStartInView, "the answer starts on screen");
    want(seen.logCount === m.phase.tail, `the log holds this phase's ${m.phase.tail} lines (page: ${seen.logCount})`);
    if (seen.violations !== null) want(seen.violations === m.phase.violations, `this phase's ${m.phase.violations} violations (page: ${seen.violations})`);
    const later = new Set(m.broker.topics.filter((t) => t.phase > m.phase.number).map((t) => t.name));
    const offered = [seen.topic, ...seen.offered].filter(Boolean);
    want(!offered.some((t) => later.has(t)), `no topic of a later phase (offered: ${offered.join(", ")})`);
    // A topic made before this phase is offered only once the narration has brought it up.
    const own = new Set(m.broker.topics.filter((t) => t.phase === m.phase.number).map((t) => t.name));
    const unnamed = offered.filter((t) => !own.has(t) && !m.told.includes(t));
    want(!unnamed.length, `no topic the story has not named yet (${unnamed.map((t) => `${t} of phase ${(m.broker.topics.find((x) => x.name === t) || {}).phase}`).join(", ")})`);
    const rows = m.phase.answered && m.phase.lags.length ? m.phase.lags[m.phase.lags.length - 1].filter((r) => r.topic === seen.topic) : [];
    if (rows.length) {
      const max = Math.max(...rows.map((r) => (r.current_offset === null || r.log_end_offset === null ? 0 : Math.max(0, r.log_end_offset - r.current_offset))));
      want(seen.lagMax === max, `the bars draw the lab's measured lag (max ${max}, page ${seen.lagMax}, ${seen.when})`);
    }
    // Members that are different members have different names, in the table and on the bars.
    const lagRows = m.phase.lags.flat();
    const ids = new Set(lagRows.map((r) => r.consumer_id).filter(Boolean));
    const names = new Set(seen.lagNames.map((r) => r[r.length - (lagRows.some((x) => x.processed_uncommitted !== undefined) ? 2 : 1)]).filter((n) => n && n !== "-"));
    if (m.phase.answered && m.phase.lags.length === 1 && ids.size > 1) want(names.size === ids.size, `${ids.size} members, ${names.size} names in the lag table`);
    want(new Set(seen.chips).size === seen.chips.length, `member chips are told apart (${seen.chips.join(", ")})`);
    want(!seen.chipsCut.length, `no member chip cut at the panel's bottom (${seen.chipsCut.join(", ")})`);
    // The lab's panels: exactly what it measured in this phase, once its answer is out.
    const told = m.phase.answered ? [...m.phase.panels.values()] : [];
    const asTold = told.map((p) => JSON.stringify([p.title, p.figures.map((f) => [f.label, f.value]), p.bars.map((b) => [b.label, b.value, b.note])]));
    const onPage = seen.panels.map((p) => JSON.stringify([p.title, p.figures, p.bars]));
    want(JSON.stringify(onPage) === JSON.stringify(asTold), `the panels are the phase's as measured (journal ${asTold.join(" ") || "none"}, page ${onPage.join(" ") || "none"})`);
    want(!seen.panels.length || seen.panels[0].figuresInView, `the panel's key figures are on screen`);
  }
  want(!seen.clipped.length, `nothing clipped: ${seen.clipped.slice(0, 4).join("; ")}`);
  want(!seen.small.length, `no text under 18 px: ${seen.small.slice(0, 4).join("; ")}`);
  return bad;
}

// Per lab: figures of the JSON the page must show at the phase that tells them.
function labFigures(lab, json, m, seen) {
  const bad = [];
  if (lab === "partitions" && m.phase.answered && m.phase.told !== null && !m.summary) {
    const f = json.figures;
    const runs = [f.failure, ...Object.values(f.fixes).filter((x) => x && x.violations !== undefined)];
    const counts = runs.map((r) => r.violations);
    if (!counts.includes(seen.violations)) bad.push(`partitions phase ${m.phase.number}: ${seen.violations} violations, none of the JSON's runs (${counts.join(", ")})`);
    if (m.phase.told > 0 && seen.violations !== f.failure.violations) bad.push(`partitions phase ${m.phase.number}: ${seen.violations} violations, the JSON's failure has ${f.failure.violations}`);
  }
  bad.push(...panelFigures(lab, json.figures, m, seen));
  return bad;
}

const thousands = (n) => Number(n).toLocaleString("en-US");
const euros = (cents) => `${cents < 0 ? "-" : ""}€${thousands(Math.floor(Math.abs(cents) / 100))}.${String(Math.abs(cents) % 100).padStart(2, "0")}`;

// Each panel the page shows against the lab's JSON figures for the same seed: the panel of a
// phase is told by its title; its figures are the JSON's.
function panelFigures(lab, f, m, seen) {
  const bad = [];
  const at = `${lab} phase ${m.phase.number}`;
  const want = (ok, what) => { if (!ok) bad.push(`${at}: ${what}`); };
  const figure = (p, label) => (p.figures.find(([l]) => l === label) || [])[1];
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  for (const p of seen.panels) {
    const show = JSON.stringify(p);
    if (lab === "rebalance" && p.title === "members") {
      want(same(p.bars.map((b) => b[0]).sort(), f.members.slice().sort()), `the members panel names ${f.members} (${show})`);
      want(p.bars.reduce((a, b) => a + b[1], 0) === f.payments, `the members' payments add up to ${f.payments} (${show})`);
      want(p.bars.every((b) => b[2].startsWith("generation ")), `each member's generation (${show})`);
    } else if (lab === "rebalance" && p.title === "payments applied twice") {
      want(figure(p, "applied twice") === String(f.duplicates) && figure(p, "charged twice") === euros(f.double_charged_cents),
        `${f.duplicates} applied twice, ${euros(f.double_charged_cents)} (${show})`);
    } else if (lab === "rebalance" && p.title === "generations") {
      want(same(p.bars.map((b) => [b[0], b[1]]), f.redeliveries.map((r) => [`${f.topic}-${r.partition}`, r.count])) &&
        p.bars.every((b, i) => b[2] === `${f.redeliveries[i].first.member} (gen ${f.redeliveries[i].first.generation}) then ${f.redeliveries[i].second.member} (gen ${f.redeliveries[i].second.generation})`),
        `the redeliveries by generation (${show})`);
    } else if (lab === "idempotence" && p.title === "acks lost and duplicates") {
      const runs = [
        [f.acks_lost, f.duplicates_without_idempotence, f.per_partition.without_idempotence],
        [f.acks_lost_with_idempotence, f.duplicates_with_idempotence, f.per_partition.with_idempotence],
        [0, f.duplicates_after_partition_change, f.per_partition.after_partition_change],
        [null, f.duplicates_after_producer_restart, f.per_partition.after_producer_restart],
      ][m.phase.number - 1];
      want(!!runs, `a panel in phase ${m.phase.number}`);
      if (!runs) continue;
      const [lost, duplicates, rows] = runs;
      const rowsLost = rows.reduce((a, r) => a + r.acks_lost, 0);
      want(figure(p, "acks lost") === String(lost === null ? rowsLost : lost) && figure(p, "duplicates") === String(duplicates),
        `${lost} acks lost, ${duplicates} duplicates (${show})`);
      want(same(p.bars.map((b) => [b[0], b[1]]), rows.map((r) => [`partition ${r.partition}`, r.duplicates])), `duplicates per partition (${show})`);
    } else if (lab === "rehash" && p.title === "keys moving") {
      want(figure(p, "keys") === thousands(f.keys), `${f.keys} keys (${show})`);
      want(same(p.bars.map((b) => b[1]), f.schemes.map((x) => Math.round(x.moved_fraction * f.keys))), `keys moved per scheme (${show})`);
    } else if (lab === "hot-tenant" && p.title.startsWith("tenants inside partition")) {
      want(p.title === `tenants inside partition ${f.hot_partition}`, `the hot partition ${f.hot_partition} (${show})`);
      want(same(p.bars.map((b) => [b[0], b[1]]), f.hot_partition_lag_by_tenant.map((t) => [t.tenant, t.records])), `the tenants in its lag (${show})`);
    } else if (lab === "migrate" && p.title === "shards, ring version 7 to 8") {
      want(figure(p, "users moving") === String(f.moved_users), `${f.moved_users} users moving (${show})`);
    } else if (lab === "migrate" && p.title.startsWith("run ")) {
      const r = f.runs.find((x) => `run ${x.run}` === p.title);
      want(!!r && figure(p, "acknowledged writes") === String(r.acknowledged) && figure(p, "lost writes") === String(r.lost_writes) &&
        figure(p, "missed reads") === String(r.missed_reads) && figure(p, "refused as stale (fenced)") === String(r.refused_stale),
        `the run's audit as the JSON's (${show}; JSON ${JSON.stringify(r)})`);
    } else if (lab === "routing" && p.title === "the producer's map of leaders") {
      want(figure(p, "NOT_LEADER_OR_FOLLOWER answers") === String(f.fresh_map_not_leader_errors) && p.bars.length === f.nodes,
        `${f.fresh_map_not_leader_errors} answers with a fresh map, ${f.nodes} nodes (${show})`);
    } else if (lab === "routing" && p.title === "the producer's stale map") {
      want(figure(p, "NOT_LEADER_OR_FOLLOWER answers") === String(f.stale_map_not_leader_errors), `${f.stale_map_not_leader_errors} answers with a stale map (${show})`);
    } else if (lab === "routing" && p.title === "a map never refreshed") {
      want(figure(p, "refused: not stored") === String(f.records_failed_never_refreshing_client) &&
        figure(p, "redirect ratio") === `${(f.redirect_ratio_never_refreshing_client * 100).toFixed(1)} %`,
        `${f.records_failed_never_refreshing_client} refused, ratio ${f.redirect_ratio_never_refreshing_client} (${show})`);
    } else {
      want(false, `a panel the test knows (${show})`);
    }
  }
  return bad;
}

export async function walkLab(browser, serve, binary, artifacts, lab, say) {
  const json = figures(binary, lab);
  const served = serve([lab, "--web", "127.0.0.1:0", "--seed", SEED], "room view");
  const url = await served.url;
  say(`${lab} at ${url}`);
  const pages = [];
  for (const [i, size] of SIZES.entries()) {
    const page = await browser.newPage({ viewport: size, colorScheme: SCHEMES[i] });
    await page.goto(url);
    pages.push({ page, size });
  }
  const failures = [];
  const driver = pages[0].page;
  let shots = 0;
  for (let turn = 0; turn < 80; turn++) {
    await driver.waitForFunction(() => !document.getElementById("reveal").disabled ||
      !document.getElementById("next").disabled || /^done|^stopped/.test(document.getElementById("status").textContent),
    null, { timeout: 600000 });
    const seens = [];
    for (const { page } of pages) {
      // Both pages have drawn the journal up to here.
      await page.waitForFunction(() => !document.getElementById("reveal").disabled || !document.getElementById("next").disabled ||
        /^done|^stopped/.test(document.getElementById("status").textContent), null, { timeout: 60000 });
      await page.waitForTimeout(150);
      seens.push(await page.evaluate(read));
    }
    // Read after the pages: the lab waits, so the journal is theirs, and the broker's figures
    // are at least as new as theirs (a topic made in this phase may reach the poller late).
    const state = await (await fetch(url + "api/state")).json();
    const m = moment(state);
    const ended = state.journal.some((e) => e.event === "end");
    for (const [i, { page, size }] of pages.entries()) {
      const seen = seens[i];
      failures.push(...check(lab, size, seen, m, json), ...labFigures(lab, json, m, seen));
      if (m.phase.answered || ended) {
        const name = ended ? `${lab}-verdict-${size.width}x${size.height}.png` : `${lab}-phase${m.phase.number}-${size.width}x${size.height}.png`;
        await page.screenshot({ path: join(artifacts, name) });
        shots++;
      }
    }
    if (ended) break;
    const answering = !(await driver.isDisabled("#reveal"));
    const before = state.journal.length;
    await driver.click(answering ? "#reveal" : "#next");
    await driver.waitForFunction(async (n) => (await (await fetch("/api/state")).json()).journal.length > n, before, { timeout: 600000, polling: 200 });
  }
  for (const { page } of pages) await page.close();
  const end = (await (await fetch(url + "api/state")).json()).journal.find((e) => e.event === "end");
  served.child.stdin.end("\n");
  const { code } = await served.exited;
  if (code !== end.exit_code) failures.push(`${lab}: exit ${code}, the page said ${end.exit_code}`);
  say(`${lab}: ${shots} screenshots, ${failures.length} failed checks`);
  return failures;
}
