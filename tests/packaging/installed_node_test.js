// Run by tests/packaging/run.sh in a fresh Node project where only the package is installed
// (`npm install partitioned-log-broker-*.tgz`): node --test installed_node_test.js
'use strict'
const assert = require('node:assert')
const { execFileSync, spawn } = require('node:child_process')
const net = require('node:net')
const { test } = require('node:test')
const { createInterface } = require('node:readline')

const { startBroker, CLIENT } = require('partitioned-log-broker')

test('startBroker gives a broker the CLI checks against', async () => {
  const broker = await startBroker()
  try {
    assert.strictEqual((await broker.client('topics', 'create', 'orders', '--partitions', '3')).code, 0)
    const lines = Array.from({ length: 60 }, (_, i) => `customer-${i % 7}:${i}\n`).join('')
    execFileSync(CLIENT, ['--bootstrap', broker.bootstrap, 'produce', 'orders', '-K', ':'], { input: lines })
    const order = await broker.client('check', 'order', 'orders', '--seq', 'value')
    assert.strictEqual(order.code, 0, order.stderr)
    assert.match(order.stdout, /^checked 60 records of 7 keys/)
    const behind = await broker.client('groups', 'wait', 'billing', '--max-lag', '0', '--topic', 'orders', '--timeout', '1')
    assert.strictEqual(behind.code, 1, 'nobody consumed yet: not caught up')
    assert.strictEqual((await broker.client('groups', 'lag', 'nosuch')).code, 2)
  } finally {
    await broker.stop()
  }
})

const refuses = (port) => new Promise((resolve) => {
  const socket = net.connect(port, '127.0.0.1')
  socket.once('connect', () => { socket.destroy(); resolve(false) })
  socket.once('error', () => resolve(true))
})

test('a killed runner leaves no broker', async () => {
  const script = "require('partitioned-log-broker').startBroker()" +
    '.then((b) => { console.log(b.bootstrap); setInterval(() => {}, 1000) })'
  const runner = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const { value } = await createInterface({ input: runner.stdout })[Symbol.asyncIterator]().next()
  const port = Number(value.split(':').pop())
  assert.strictEqual(await refuses(port), false, 'it serves')
  runner.kill('SIGKILL')
  const deadline = Date.now() + 60000
  while (!(await refuses(port))) {
    assert.ok(Date.now() < deadline, 'the broker outlived the runner that started it')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
})
