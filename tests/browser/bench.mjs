// Benchmark, not a test: can the room view keep up with 64 partitions updated 4 times a second?
//
//   node bench.mjs WORKSHOP_BINARY [SECONDS]
//
// Starts `workshop playground --web 127.0.0.1:0`, opens it in headless Chromium at 1280x720,
// starts the free mode on 64 partitions with 12 members and 2,000 records a second, lets it
// settle, then measures for SECONDS (default 30):
// - the server: CPU of the room view's threads (HTTP, event stream, the broker poller, named
//   `room-view`) and of the whole process (embedded broker, producer, members, room view), from
//   /proc; how long one poll of the broker takes (ListOffsets, DescribeGroups, OffsetFetch);
// - the browser: updates received a second (the poller's and the free mode's), the time a
//   handler takes to draw one, the renderer's main-thread busy share (Chrome's own TaskDuration),
//   frames drawn a second.
// Prints one JSON object.
import { spawn, execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { chromium } from "playwright-core";

const [binary, secondsArg] = process.argv.slice(2);
const SECONDS = Number(secondsArg || 30);
const PARTITIONS = 64;
const MEMBERS = 12;
const RATE = 2000;
const WARMUP_MS = 8000;
const TICK = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim());

function cpuTicks(pid) {
  let roomView = 0;
  let all = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat;
    try { stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8"); } catch { continue; }
    const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    all += ticks;
    if (name.startsWith("room-view")) roomView += ticks;
  }
  return { roomView, all };
}

const quantile = (xs, q) => {
  if (!xs.length) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const round = (x, d = 2) => (x === null ? null : Math.round(x * 10 ** d) / 10 ** d);

const child = spawn(binary, ["playground", "--web", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
const url = await new Promise((resolve, reject) => {
  let stderr = "";
  child.stderr.on("data", (c) => {
    stderr += c;
    const m = stderr.match(/playground: (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  child.on("exit", (code) => reject(new Error(`the playground exited (${code}): ${stderr}`)));
});

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
let result;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  // Counts each update the page gets and times the handler that draws it.
  await page.addInitScript(() => {
    const b = (window.__bench = { broker: 0, free: 0, bytes: 0, handlerMs: [], pollMs: [], frames: 0 });
    const Original = window.EventSource;
    window.EventSource = class extends Original {
      addEventListener(type, handler, options) {
        if (type !== "broker" && type !== "free") return super.addEventListener(type, handler, options);
        return super.addEventListener(type, (m) => {
          const t0 = performance.now();
          handler(m);
          b.handlerMs.push(performance.now() - t0);
          b[type] += 1;
          b.bytes += m.data.length;
          if (type === "broker") b.pollMs.push(JSON.parse(m.data).poll_ms);
        }, options);
      }
    };
    const frame = () => { b.frames += 1; requestAnimationFrame(frame); };
    requestAnimationFrame(frame);
  });
  await page.goto(url);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  await page.click("#tab-free");
  await page.fill("#f-partitions", String(PARTITIONS));
  await page.fill("#f-members", String(MEMBERS));
  await page.fill("#f-capacity", "200");
  await page.fill("#f-rate", String(RATE));
  await page.click("#f-start");
  await page.waitForFunction((n) => document.querySelector("#f-broker #partition-count")?.textContent === `${n} partitions`,
    PARTITIONS, { timeout: 30000 });
  await page.waitForTimeout(WARMUP_MS);

  const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
  const counters = () => page.evaluate(() => {
    const b = window.__bench;
    const out = { broker: b.broker, free: b.free, bytes: b.bytes, frames: b.frames, handlerMs: b.handlerMs, pollMs: b.pollMs };
    b.handlerMs = [];
    b.pollMs = [];
    return out;
  });
  const free = () => page.evaluate(() => fetch("/api/state").then((r) => r.json()).then((s) => s.latest.free));
  const [m0, c0, cpu0, f0] = [await metrics(), await counters(), cpuTicks(child.pid), await free()];
  const t0 = process.hrtime.bigint();
  await page.waitForTimeout(SECONDS * 1000);
  const [m1, c1, cpu1, f1] = [await metrics(), await counters(), cpuTicks(child.pid), await free()];
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  await page.screenshot({ path: new URL("./artifacts/bench-64-partitions.png", import.meta.url).pathname });
  const perSecond = (a, b) => round((b - a) / wall, 2);
  result = {
    setup: { partitions: PARTITIONS, members: MEMBERS, records_per_second_asked: RATE, poll_every_ms: 250, seconds: round(wall, 1) },
    server: {
      room_view_cpu_percent_of_a_core: round(100 * (cpu1.roomView - cpu0.roomView) / TICK / wall, 1),
      process_cpu_percent_of_a_core: round(100 * (cpu1.all - cpu0.all) / TICK / wall, 1),
      poll_ms_p50: quantile(c1.pollMs, 0.5),
      poll_ms_p99: quantile(c1.pollMs, 0.99),
      poll_ms_max: quantile(c1.pollMs, 1),
      records_produced_per_second: perSecond(f0.produced, f1.produced),
      records_processed_per_second: perSecond(f0.processed, f1.processed),
    },
    browser: {
      broker_updates_per_second: perSecond(c0.broker, c1.broker),
      free_mode_updates_per_second: perSecond(c0.free, c1.free),
      kib_per_second: round((c1.bytes - c0.bytes) / 1024 / wall, 1),
      handler_ms_p50: round(quantile(c1.handlerMs, 0.5)),
      handler_ms_p99: round(quantile(c1.handlerMs, 0.99)),
      handler_ms_max: round(quantile(c1.handlerMs, 1)),
      main_thread_busy_percent: round(100 * (m1.TaskDuration - m0.TaskDuration) / wall, 1),
      script_percent: round(100 * (m1.ScriptDuration - m0.ScriptDuration) / wall, 1),
      layout_and_style_percent: round(100 * (m1.LayoutDuration - m0.LayoutDuration + m1.RecalcStyleDuration - m0.RecalcStyleDuration) / wall, 1),
      frames_per_second: perSecond(c0.frames, c1.frames),
    },
  };
  await page.click("#f-stop");
} finally {
  await browser.close();
  child.kill("SIGTERM");
}
console.log(JSON.stringify(result, null, 2));
