// The room view and the playground in a real headless Chromium: the pages the workshop binary
// serves, driven as a trainer drives them, against the real (embedded) broker.
//
//   node room.test.mjs WORKSHOP_BINARY ARTIFACTS_DIR
//
// 1. `workshop playground --web 127.0.0.1:0`: source 000's buttons in the source's order; the table
//    must read 4/4/4, then 10/1/1 with 6 queued, then 12 queued, drained 8, 4, 0; hot key 1 moves
//    the load to P1, hot key 3 back to P0. Then the free mode: a topic grown from 6 to 12
//    partitions while records flow.
//    At 1280x720 and 1024x768: nothing cut at the side, no visible text under 18 px.
// 2. Every lab with `--web`, phase by phase at both sizes (labs.mjs); `LABS=a,b` walks only those
//    (`playground` among them for part 1).
// Screenshots of each go to ARTIFACTS_DIR. Any failed expectation exits 1 with the reason.
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { LABS, SIZES, read, walkLab } from "./labs.mjs";

const [binary, artifacts] = process.argv.slice(2);
if (!binary || !artifacts) {
  console.error("usage: node room.test.mjs WORKSHOP_BINARY ARTIFACTS_DIR");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync"];
const VIEWPORT = { width: 1280, height: 720 };
const started = Date.now();
const say = (text) => console.log(`[browser ${((Date.now() - started) / 1000).toFixed(1)}s] ${text}`);

function expect(ok, what) {
  if (!ok) throw new Error(`expected ${what}`);
  say(`ok: ${what}`);
}

// Starts the workshop with `args`; resolves with the process and the URL it prints on stderr.
const children = [];
function serve(args, prefix) {
  const child = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"] });
  children.push(child);
  let stderr = "";
  child.stdout.resume();
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const url = new Promise((resolve, reject) => {
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      const found = stderr.match(new RegExp(`${prefix}: (http://\\S+)`));
      if (found) resolve(found[1]);
    });
    exited.then(({ code }) => reject(new Error(`workshop ${args[0]} exited (${code}) before serving: ${stderr}`)));
    setTimeout(() => reject(new Error(`workshop ${args[0]} printed no URL in 30 s: ${stderr}`)), 30000);
  });
  return { child, exited, url, stderr: () => stderr };
}

// The exercise table, as the room reads it: per partition [arrived, received, completed, queued].
async function table(page) {
  return page.$$eval("#ex-table tr[data-partition]", (rows) => rows.map((r) =>
    ["arrived", "received", "completed", "queued"].map((c) => Number(r.querySelector("td." + c).textContent))));
}

const column = (rows, i) => rows.map((r) => r[i]).join("/");

// Clicks a button of the exercise and waits for the page to have the server's answer.
async function press(page, id) {
  await page.waitForSelector(`#${id}:not([disabled])`);
  const answered = page.waitForResponse((r) => r.url().endsWith("/api/exercise"));
  await page.click(`#${id}`);
  const answer = await answered;
  expect(answer.status() === 200, `200 for ${id} (got ${answer.status()})`);
  await page.waitForSelector("#batch:not([disabled])");
  return table(page);
}

async function hotKey(page, key) {
  await page.waitForSelector("#hot-key:not([disabled])");
  await page.selectOption("#hot-key", String(key));
  return press(page, "hot");
}

// At both sizes: nothing cut at the side, no visible text under 18 px; a screenshot of each.
async function layout(page, what) {
  for (const size of SIZES) {
    await page.setViewportSize(size);
    await page.waitForTimeout(300);
    const seen = await page.evaluate(read);
    expect(!seen.clipped.length, `${what} at ${size.width}x${size.height}: nothing clipped (${seen.clipped.slice(0, 3).join("; ")})`);
    expect(!seen.small.length, `${what} at ${size.width}x${size.height}: no text under 18 px (${seen.small.slice(0, 3).join("; ")})`);
    await page.screenshot({ path: join(artifacts, `${what.replace(/ /g, "-")}-${size.width}x${size.height}.png`) });
  }
  await page.setViewportSize(VIEWPORT);
}

async function playground(browser) {
  const served = serve(["playground", "--web", "127.0.0.1:0"], "playground");
  const url = await served.url;
  say(`playground at ${url}`);
  const page = await browser.newPage({ viewport: VIEWPORT });
  await page.goto(url);
  await page.waitForSelector("#ex-table tr[data-partition]");

  let rows = await press(page, "batch");
  expect(column(rows, 0) === "4/4/4" && column(rows, 3) === "0/0/0", `uniform: arrivals 4/4/4, nothing queued (${JSON.stringify(rows)})`);
  rows = await hotKey(page, 0);
  expect(column(rows, 1) === "0/0/0", "hot key 0 starts a new run");
  rows = await press(page, "batch");
  expect(column(rows, 0) === "10/1/1" && column(rows, 2) === "4/1/1" && column(rows, 3) === "6/0/0",
    `hot key 0: arrivals 10/1/1, completed 4/1/1, 6 queued on P0 (${JSON.stringify(rows)})`);
  rows = await press(page, "batch");
  expect(rows[0][3] === 12, `a second batch: P0's queue is 12 (${rows[0][3]})`);
  await page.screenshot({ path: join(artifacts, "playground-exercise.png") });
  await layout(page, "playground exercise");
  const drained = [];
  for (let i = 0; i < 3; i++) drained.push((await press(page, "drain"))[0][3]);
  expect(drained.join(" -> ") === "8 -> 4 -> 0", `drained 12 -> ${drained.join(" -> ")}`);
  rows = await hotKey(page, 1);
  rows = await press(page, "batch");
  expect(column(rows, 0) === "1/10/1" && column(rows, 3) === "0/6/0", `hot key 1 moves the load to P1 (${JSON.stringify(rows)})`);
  rows = await hotKey(page, 3);
  rows = await press(page, "batch");
  expect(column(rows, 0) === "10/1/1" && column(rows, 3) === "6/0/0", `hot key 3 moves it back to P0 (${JSON.stringify(rows)})`);
  const share = await page.textContent("#ex-shares .share[data-partition='0'] .pct");
  expect(share.trim() === "83 %", `P0's share is 83 % (${share.trim()})`);
  // The broker panel reads the run's topic from the broker: P0's log end is the 10 produced.
  await page.waitForFunction(() => /playground-\d+/.test(document.querySelector("#ex-broker #topic-name")?.textContent || ""));

  // The free mode: records flow; the topic grows from 6 to 12 partitions under the group.
  await page.click("#tab-free");
  await page.fill("#f-partitions", "6");
  await page.fill("#f-rate", "200");
  await page.click("#f-start");
  await page.waitForFunction(() => Number(document.querySelector("#f-figures b:nth-of-type(2)")?.textContent || 0) > 0,
    null, { timeout: 20000 });
  await page.fill("#f-grow", "12");
  await page.click("#f-grow-go");
  await page.waitForFunction(() => /^12 partitions$/.test(document.querySelector("#f-broker #partition-count")?.textContent || ""),
    null, { timeout: 20000 });
  expect(true, "free mode: the broker panel shows 12 partitions after the increase");
  await page.waitForTimeout(2500);
  await page.screenshot({ path: join(artifacts, "playground-free.png") });
  await layout(page, "playground free mode");
  await page.click("#f-stop");

  await page.close();
  served.child.kill("SIGTERM");
  const { code } = await served.exited;
  expect(code === 0, `the playground stops cleanly on SIGTERM (exit ${code})`);
}

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: FLAGS, headless: true });
try {
  const only = process.env.LABS ? process.env.LABS.split(",") : ["playground", ...LABS];
  if (only.includes("playground")) await playground(browser);
  const failures = [];
  for (const lab of only.filter((l) => l !== "playground")) failures.push(...await walkLab(browser, serve, binary, artifacts, lab, say));
  for (const f of failures) console.error(`[browser] ${f}`);
  if (failures.length) throw new Error(`${failures.length} failed checks`);
  say("all passed");
} catch (e) {
  console.error(`[browser] FAILED: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
  // A failed run leaves no workshop behind.
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}
