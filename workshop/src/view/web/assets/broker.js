// The broker panel: one topic's partitions (log end, committed offset, lag), the average lag
// beside the bars, and the group's members. Shared by the room view and the playground.
// Figures come from the server's poller, or, where the lab measured the moment it narrates (a lag
// table), from the lab's own measurement: never from the page.
"use strict";

const PALETTE = ["#6cb6ff", "#4fd16a", "#ffab40", "#d2a8ff", "#ff7eb6", "#56d4dd",
  "#e3b341", "#a5d6ff", "#7ee787", "#ffa198", "#bc8cff", "#f2cc60"];

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

// Each member's short name, as the terminal's lag table names them: its client id when every
// member has its own, else `consumer-N` in the order they first own a partition. `owners` is
// [member id, client id] in partition order, then members that own nothing.
function shortNames(owners) {
  const order = [];
  const client = new Map();
  for (const [id, clientId] of owners) {
    if (id && !client.has(id)) { order.push(id); client.set(id, clientId); }
  }
  const clients = new Set(order.map((id) => client.get(id)));
  const distinct = clients.size === order.length && order.every((id) => client.get(id));
  return new Map(order.map((id, i) => [id, distinct ? client.get(id) : `consumer-${i + 1}`]));
}

class BrokerPanel {
  constructor(el, options = {}) {
    this.el = el;
    this.only = options.only || null; // a function (topic name) -> bool: which topics to offer
    this.measured = null; // {topic, group, ends, committed, owners: [[member id, client id]], label}
    this.pinned = null;
    this.primary = null;
    this.lastChange = {}; // topic -> time its offsets last changed
    this.lastSum = {};
    this.valueless = false; // whether fit() dropped the values above the bars
    this.renders = 0;
    this.renderMs = 0;
    el.addEventListener("change", (e) => {
      if (e.target.id !== "topic-pick") return;
      this.pinned = e.target.value || null;
      e.target.blur();
      this.render();
    });
  }

  update(view) {
    this.view = view;
    const now = performance.now();
    for (const t of view.topics) {
      const sum = t.log_ends.reduce((a, b) => a + b, 0) +
        t.consumers.reduce((a, c) => a + c.committed.reduce((x, y) => x + (y || 0), 0), 0) +
        t.log_ends.length * 1e9;
      if (this.lastSum[t.name] === undefined || this.lastSum[t.name] !== sum) this.lastChange[t.name] = now;
      this.lastSum[t.name] = sum;
    }
    this.render();
  }

  topics() {
    const all = (this.view && this.view.topics) || [];
    return this.only ? all.filter((t) => this.only(t)) : all;
  }

  // The topic to draw: the one pinned, else the one the lab measured, else the one that changed
  // last (held for a moment, so two busy topics do not flicker), else the newest.
  choose(topics) {
    const now = performance.now();
    if (this.pinned && topics.some((t) => t.name === this.pinned)) return this.pinned;
    if (this.measured && topics.some((t) => t.name === this.measured.topic)) return this.measured.topic;
    // A topic a group reads tells more (lag, members) than one only written.
    const read = topics.filter((t) => t.consumers.length);
    let best = null;
    for (const t of read.length ? read : topics) {
      if (!best || (this.lastChange[t.name] || 0) >= (this.lastChange[best] || 0)) best = t.name;
    }
    const current = topics.some((t) => t.name === this.primary) ? this.primary : null;
    if (current && best !== current && now - (this.lastChange[current] || 0) < 1500) return current;
    return best;
  }

  // The figures to draw for `topic`: the lab's measurement of it, or the poller's.
  figures(topic) {
    const m = this.measured && this.measured.topic === topic.name ? this.measured : null;
    if (m) return { ...m, live: false };
    const score = (c) => c.committed.filter((x) => x !== null).length + c.owners.filter((x) => x).length;
    const consumer = topic.consumers.slice().sort((a, b) => score(b) - score(a))[0] || null;
    const ends = topic.log_ends;
    return {
      group: consumer ? consumer.group : null,
      ends,
      committed: consumer ? consumer.committed : ends.map(() => null),
      owners: ends.map((_, p) => consumer && consumer.owner_ids[p] ? [consumer.owner_ids[p], consumer.owners[p]] : [null, null]),
      live: true,
    };
  }

  // Sizes the two charts so that `used()` (the height of what the panel holds) fills `container`
  // without scrolling, whatever the screen and however many lines the figures above them take.
  fit(container, used) {
    const style = getComputedStyle(container);
    const inner = container.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
    // A few passes: a new height may rewrap what is above or below the charts.
    const size = () => {
      for (let pass = 0; pass < 3; pass++) {
        const now = this.height || 100;
        const height = Math.max(24, Math.min(400, Math.floor(now + (inner - used()) / 2)));
        if (Math.abs(height - now) <= 2) return;
        this.height = height;
        this.render();
      }
    };
    if (this.valueless) {
      this.valueless = false;
      this.render();
    }
    size();
    // Still too tall at the smallest charts (many members in the chips below them): the values
    // above the bars go, and the room they kept with them; the key figures still say the most.
    if (used() > inner + 1) {
      this.valueless = true;
      this.render();
      size();
    }
  }

  render() {
    // Redrawn four times a second: not while the trainer has the topic list open.
    if (document.activeElement && document.activeElement.id === "topic-pick" && this.el.contains(document.activeElement)) return;
    const started = performance.now();
    const topics = this.topics();
    if (!topics.length) {
      this.el.innerHTML = `<div class="broker-head"><span class="topic">Broker</span></div>` +
        `<p class="dim" id="no-topic">${esc(this.empty || "No topic yet: the lab has not created one.")}</p>`;
      return;
    }
    const name = this.choose(topics);
    this.primary = name;
    const topic = topics.find((t) => t.name === name);
    const f = this.figures(topic);
    const group = f.group && this.view.groups.find((g) => g.name === f.group);
    const n = f.ends.length;
    // Owners in partition order, then the group's members that own nothing here.
    const everyone = f.owners.concat(group && f.live ? group.members.map((m) => [m.member_id, m.client_id]) : []);
    const names = shortNames(everyone);
    const ids = [...names.keys()];
    const colour = (id) => PALETTE[Math.max(0, ids.indexOf(id)) % PALETTE.length];

    const { ends, committed } = f;
    const lags = ends.map((end, p) => (committed[p] === null || end === null ? null : Math.max(0, end - committed[p])));
    const known = lags.filter((l) => l !== null);
    const avg = known.length ? known.reduce((a, b) => a + b, 0) / known.length : 0;
    const maxLag = known.length ? Math.max(...known) : 0;
    // The tallest bar stops short of the top, so its value stays inside the chart.
    const maxEnd = Math.max(1, ...ends) * 1.12;
    const lagScale = Math.max(1, maxLag) * 1.25;
    const worst = lags.indexOf(maxLag);
    // A value needs about 44 px at 18 px type: shown when the columns are that wide.
    const width = this.el.clientWidth || 600;
    const showValues = !this.valueless && n <= Math.floor((width - 70) / 48);

    let offsets = "";
    let lagCols = "";
    let labels = "";
    const every = Math.max(1, Math.ceil((n * 30) / Math.max(1, width - 70)));
    for (let p = 0; p < n; p++) {
      const endH = (100 * ends[p]) / maxEnd;
      const doneH = committed[p] === null ? 0 : (100 * committed[p]) / maxEnd;
      offsets += `<div class="col" data-partition="${p}" title="P${p}: log end ${fmt(ends[p])}, committed ${fmt(committed[p])}">` +
        `<div class="bar end" style="height:${endH}%"></div><div class="bar committed" style="height:${doneH}%"></div>` +
        (showValues ? `<div class="value end-value" style="bottom:${endH}%">${fmt(ends[p])}</div>` : "") + "</div>";
      const lagH = lags[p] === null ? 0 : (100 * lags[p]) / lagScale;
      lagCols += `<div class="col" data-partition="${p}" title="P${p}: lag ${fmt(lags[p])}"><div class="bar lag" style="height:${lagH}%"></div>` +
        (showValues ? `<div class="value lag-value" style="bottom:${lagH}%">${fmt(lags[p])}</div>` : "") + "</div>";
      const owner = f.owners[p] && f.owners[p][0];
      labels += `<span style="color:${owner ? colour(owner) : "var(--dim)"}">${p % every === 0 ? p : ""}</span>`;
    }
    const avgH = (100 * avg) / lagScale;
    const mean = avg.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });
    lagCols += `<div class="col avg" title="average lag"><div class="bar" style="height:${avgH}%"></div></div>` +
      `<div class="avg-line" style="bottom:${avgH}%"></div>`;

    // The other topics of the moment, in one line: a choice, however many there are.
    const pick = topics.length > 1 ? `<select id="topic-pick" title="the topic drawn">` +
      `<option value="">${this.pinned ? "follow the lab" : `${topics.length} topics: following the lab`}</option>` +
      topics.map((t) => `<option value="${esc(t.name)}"${t.name === this.pinned ? " selected" : ""}>${esc(t.name)}</option>`).join("") +
      "</select>" : "";
    const state = group && f.live ? ` · ${esc(group.state)}` : "";
    const owned = new Map();
    f.owners.forEach(([id], p) => { if (id) owned.set(id, (owned.get(id) || []).concat([p])); });
    // The part every member's name shares (order-service-consumer-1, -2: order-service-) is
    // said once, so the chips fit beside each other.
    const all = ids.map((id) => names.get(id));
    let common = all.length > 1 ? all.reduce((a, b) => { let i = 0; while (i < a.length && a[i] === b[i]) i++; return a.slice(0, i); }) : "";
    common = common.slice(0, common.lastIndexOf("-") + 1);
    const chips = (common ? `<span class="dim">${esc(common)}…</span>` : "") + ids.map((id) =>
      `<span class="member"><span class="chip" style="border-color:${colour(id)};color:${colour(id)}">${esc(names.get(id).slice(common.length))}</span> ` +
      `${owned.has(id) ? "P" + esc(ranges(owned.get(id))) : "<span class='dim'>none</span>"}</span>`).join("");
    const total = ends.reduce((a, b) => a + (b || 0), 0);
    const when = f.live ? (this.view.live ? "live" : "at the end") : esc(f.label || "as the lab measured it");
    this.el.innerHTML =
      `<div class="broker-head"><span class="topic" id="topic-name">${esc(name)}</span>` +
      `<span id="partition-count">${n} partitions</span>` +
      `<span class="group">${f.group ? "group " + esc(f.group) : "no group"}${state}</span>` +
      `<span class="when" id="broker-when">${when}</span></div>` +
      (pick ? `<div class="topics">${pick}</div>` : "") +
      `<div class="key-figures"><span>records <b id="records">${fmt(total)}</b></span>` +
      `<span>lag <b id="lag-total" class="${maxLag > 0 ? "lagging" : ""}">${fmt(known.reduce((a, b) => a + b, 0))}</b></span>` +
      `<span>max <b id="lag-max">${fmt(maxLag)}</b>${maxLag > 0 ? " on P" + worst : ""}</span></div>` +
      `<div class="legend"><span><i style="background:var(--end)"></i>log end</span>` +
      `<span><i style="background:var(--committed)"></i>committed</span></div>` +
      `<div class="chart offsets${showValues ? " valued" : ""}" style="height:${this.height || 100}px">${offsets}</div>` +
      `<div class="legend"><span><i style="background:var(--lag)"></i>lag per partition</span>` +
      `<span><i style="background:var(--avg)"></i>average ${mean}</span></div>` +
      `<div class="chart lags${showValues ? " valued" : ""}" style="height:${this.height || 100}px">${lagCols}</div>` +
      `<div class="labels">${labels}<span class="avg">avg</span></div>` +
      (chips ? `<div class="members" id="members">${chips}</div>` : "");
    this.renders += 1;
    this.renderMs += performance.now() - started;
  }
}
