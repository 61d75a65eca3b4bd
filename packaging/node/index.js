'use strict'
// startBroker(): a fresh broker on 127.0.0.1, port 0, for node's test runner or Jest. It stops
// with stop(), and by itself when the test process dies (--exit-with-parent). client() runs the
// CLI without blocking the event loop, so a consumer in the same process keeps consuming while
// `groups wait` waits for it. Exit codes: 0 holds, 1 a check does not hold, 2 it could not be
// checked (no broker, unknown topic or group).
const { spawn, execFile } = require('node:child_process')
const path = require('node:path')
const { createInterface } = require('node:readline')

const BROKER = path.join(__dirname, 'bin', 'broker')
const CLIENT = path.join(__dirname, 'bin', 'client')

async function startBroker ({ args = [], metrics = false } = {}) {
  const command = ['--listen', '127.0.0.1:0', '--exit-with-parent', ...args]
  if (metrics) command.push('--metrics', '127.0.0.1:0')
  const child = spawn(BROKER, command, { stdio: ['ignore', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  const address = async (prefix) => {
    const { value } = await lines.next()
    if (!value || !value.startsWith(prefix)) {
      child.kill('SIGKILL')
      throw new Error(`the broker did not start: ${JSON.stringify(value)} (its log is on stderr)`)
    }
    return value.split(' ').pop()
  }
  const bootstrap = await address('broker listening on')
  const metricsAddress = metrics ? await address('metrics listening on') : null
  const exited = new Promise((resolve) => child.once('exit', resolve))
  return {
    bootstrap,
    metrics: metricsAddress,
    pid: child.pid,
    client: (...cliArgs) => client(bootstrap, ...cliArgs),
    async stop () {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      await exited
    }
  }
}

// Resolves to { code, stdout, stderr } whatever the exit code: a test asserts on the code.
function client (bootstrap, ...args) {
  return new Promise((resolve, reject) => {
    execFile(CLIENT, ['--bootstrap', bootstrap, ...args], (error, stdout, stderr) => {
      if (error && typeof error.code !== 'number') return reject(error)
      resolve({ code: error ? error.code : 0, stdout, stderr })
    })
  })
}

module.exports = { startBroker, client, BROKER, CLIENT }
