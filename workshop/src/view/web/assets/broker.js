// The broker panel: one topic's partitions as the broker reports them (log end, committed
// offset, lag), the average lag beside the bars, and the group's members. Shared by the room
// view and the playground. Figures come from the server's poller, never from the page.
"use strict";

const PALETTE = ["#6cb6ff", "#4fd16a", "#ffab40", "#d2a8ff", "#ff7eb6", "#56d4dd",
  "#e3b341", "#a5d6ff", "#7ee787", "#ffa198", "#bc8cff", "#f2cc60"];

function esc(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
}

// 0,1,2,3,5 -> "0-3,5": assignments stay one short line.
function ranges(numbers) {
  const sorted = numbers.slice().sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    out.push(j > i + 1 ? `${sorted[i]}-${sorted[j]}` : j === i + 1 ? `${sorted[i]},${sorted[j]}` : `${sorted[i]}`);
    i = j;
  }
  return out.join(",");
}

function fmt(n) {
  return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US");
}

class BrokerPanel {
  constructor(el, options = {}) {
    this.el = el;
    this.only = options.only || null; // a function (topic name) -> bool: which topics to offer
    this.pinned = null;
    this.primary = null;
    this.lastChange = {}; // topic -> time its offsets last changed
    this.lastSum = {};
    this.primarySince = 0;
    this.renders = 0;
    this.renderMs = 0;
    el.addEventListener("click", (e) => {
      const topic = e.target.dataset && e.target.dataset.topic;
      if (topic) {
        this.pinned = this.pinned === topic ? null : topic;
        this.render();
      }
    });
  }

  update(view) {
    this.view = view;
    const now = performance.now();
    for (const t of view.topics) {
      const sum = t.log_ends.reduce((a, b) => a + b, 0) +
        t.consumers.reduce((a, c) => a + c.committed.reduce((x, y) => x + (y || 0), 0), 0) +
        t.log_ends.length * 1e9;
      if (this.lastSum[t.name] !== undefined && this.lastSum[t.name] !== sum) this.lastChange[t.name] = now;
      if (this.lastSum[t.name] === undefined) this.lastChange[t.name] = now;
      this.lastSum[t.name] = sum;
    }
    this.render();
  }

  topics() {
    const all = (this.view && this.view.topics) || [];
    return this.only ? all.filter((t) => this.only(t.name)) : all;
  }

  // The topic to draw: the one pinned, else the one that changed last (held for a moment, so
  // two busy topics do not flicker), else the newest.
  choose(topics) {
    const now = performance.now();
    if (this.pinned && topics.some((t) => t.name === this.pinned)) return this.pinned;
    let best = null;
    for (const t of topics) {
      if (!best || (this.lastChange[t.name] || 0) >= (this.lastChange[best] || 0)) best = t.name;
    }
    const current = topics.some((t) => t.name === this.primary) ? this.primary : null;
    if (current && best !== current && now - (this.lastChange[current] || 0) < 1500) return current;
    return best;
  }

  render() {
    const started = performance.now();
    const topics = this.topics();
    if (!topics.length) {
      this.el.innerHTML = "<h2>Broker</h2><div class='dim'>No topic yet: the lab has not created one.</div>";
      return;
    }
    const name = this.choose(topics);
    if (name !== this.primary) this.primarySince = performance.now();
    this.primary = name;
    const topic = topics.find((t) => t.name === name);
    const n = topic.log_ends.length;
    // The group that consumes it: the one with the most partitions committed or owned.
    const score = (c) => c.committed.filter((x) => x !== null).length + c.owners.filter((x) => x).length;
    const consumer = topic.consumers.slice().sort((a, b) => score(b) - score(a))[0] || null;
    const group = consumer && this.view.groups.find((g) => g.name === consumer.group);
    const members = group ? group.members.map((m) => m.client_id).sort() : [];
    const colour = (client) => PALETTE[Math.max(0, members.indexOf(client)) % PALETTE.length];

    const ends = topic.log_ends;
    const committed = consumer ? consumer.committed : ends.map(() => null);
    const lags = ends.map((end, p) => (committed[p] === null ? null : Math.max(0, end - committed[p])));
    const known = lags.filter((l) => l !== null);
    const avg = known.length ? known.reduce((a, b) => a + b, 0) / known.length : 0;
    const maxLag = known.length ? Math.max(...known) : 0;
    // The tallest bar stops short of the top, so its value stays inside the chart.
    const maxEnd = Math.max(1, ...ends) * 1.12;
    const lagScale = Math.max(1, maxLag) * 1.18;
    const worst = lags.indexOf(maxLag);
    const showValues = n <= 24;

    let offsets = "";
    let lagCols = "";
    let labels = "";
    for (let p = 0; p < n; p++) {
      const endH = (100 * ends[p]) / maxEnd;
      const doneH = committed[p] === null ? 0 : (100 * committed[p]) / maxEnd;
      offsets += `<div class="col" title="P${p}: log end ${ends[p]}, committed ${fmt(committed[p])}">` +
        `<div class="bar end" style="height:${endH}%"></div><div class="bar committed" style="height:${doneH}%"></div>` +
        (n <= 12 ? `<div class="value" style="bottom:${endH}%">${fmt(ends[p])}</div>` : "") + "</div>";
      const lagH = lags[p] === null ? 0 : (100 * lags[p]) / lagScale;
      lagCols += `<div class="col" data-partition="${p}" title="P${p}: lag ${fmt(lags[p])}"><div class="bar lag" style="height:${lagH}%"></div>` +
        (showValues ? `<div class="value" style="bottom:${lagH}%">${fmt(lags[p])}</div>` : "") + "</div>";
      const owner = consumer && consumer.owners[p];
      // A label needs about 20 px: at 1280x720 a chart of 64 columns has room for every 8th.
      const every = n <= 24 ? 1 : n <= 48 ? 4 : 8;
      labels += `<span style="color:${owner ? colour(owner) : "var(--dim)"}">${p % every === 0 ? p : ""}</span>`;
    }
    const avgH = (100 * avg) / lagScale;
    const mean = avg.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
    lagCols += `<div class="col avg" title="average lag"><div class="bar" style="height:${avgH}%"></div>` +
      `<div class="value" style="bottom:${avgH}%">${mean}</div></div>` +
      `<div class="avg-line" style="bottom:${avgH}%"></div>`;

    const others = topics.filter((t) => t.name !== name)
      .map((t) => `<button data-topic="${esc(t.name)}">${esc(t.name)} (${t.log_ends.length})</button>`).join("");
    const pin = this.pinned ? `<button data-topic="${esc(this.pinned)}" class="on">pinned: ${esc(this.pinned)}</button>` : "";
    const state = group ? ` · ${esc(group.state)} · ${group.members.length} member${group.members.length === 1 ? "" : "s"}` : "";
    const chips = group ? group.members.slice().sort((a, b) => a.client_id.localeCompare(b.client_id)).map((m) => {
      const mine = m.partitions.filter((tp) => tp.startsWith(name + "-")).map((tp) => Number(tp.slice(name.length + 1)));
      const short = m.client_id.startsWith(group.name + "-") ? m.client_id.slice(group.name.length + 1) : m.client_id;
      return `<span><span class="chip" style="color:${colour(m.client_id)}" title="${esc(m.member_id)}">${esc(short)}</span> ${mine.length ? esc(ranges(mine)) : "<span class='dim'>none</span>"}</span>`;
    }).join("") : "";
    const total = ends.reduce((a, b) => a + b, 0);
    const seen = group && group.assignments_seen ? ` · assignments changed ${group.assignments_seen}×` : "";
    this.el.innerHTML =
      `<div class="broker-head"><span class="topic" id="topic-name">${esc(name)}</span>` +
      `<span id="partition-count">${n} partitions</span>` +
      `<span class="group">${consumer ? "group " + esc(consumer.group) : "no group"}${state}${seen}</span></div>` +
      (others || pin ? `<div class="topics">${pin}${others}</div>` : "") +
      `<div class="legend"><span><i style="background:var(--end)"></i>log end</span>` +
      `<span><i style="background:var(--committed)"></i>committed</span></div>` +
      `<div class="chart offsets" style="height:${this.height || 100}px">${offsets}</div>` +
      `<div class="legend"><span><i style="background:var(--lag)"></i>lag per partition</span>` +
      `<span><i style="background:var(--avg)"></i>average ${mean}</span>` +
      `<span>max ${fmt(maxLag)}${maxLag > 0 ? " on P" + worst : ""}</span></div>` +
      `<div class="chart lags" style="height:${this.height || 100}px">${lagCols}</div>` +
      `<div class="labels">${labels}<span class="avg">avg</span></div>` +
      `<div class="figures">records ${fmt(total)} · lag ${fmt(known.reduce((a, b) => a + b, 0))}` +
      ` <span class="dim">· read ${this.view.live ? "live, every " + this.view.every_ms + " ms" : "at the end"}</span></div>` +
      (chips ? `<div class="members">${chips}</div>` : "");
    this.renders += 1;
    this.renderMs += performance.now() - started;
  }
}
