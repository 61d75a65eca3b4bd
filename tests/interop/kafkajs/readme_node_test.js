// The README's Node example ("Testing your service against this broker"), run by run.sh:
// a test starts its own broker, produces with kafkajs, lets a consumer of group "billing" read,
// and asks `client` whether the group caught up and what its lag is. BROKER and CLIENT name the
// binaries.
'use strict'
const assert = require('node:assert')
const { spawn, execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { createInterface } = require('node:readline')
const { Kafka, logLevel } = require('kafkajs')

const BROKER = process.env.BROKER || 'target/release/broker'
const CLIENT = process.env.CLIENT || 'target/release/client'

async function startBroker() {
  const broker = spawn(BROKER, ['--listen', '127.0.0.1:0', '--exit-with-parent'],
    { stdio: ['ignore', 'pipe', 'ignore'] })
  const [line] = await createInterface({ input: broker.stdout })[Symbol.asyncIterator]().next()
    .then(r => [r.value])
  return { broker, addr: line.split(' ').pop() } // "broker listening on 127.0.0.1:PORT"
}

// Asynchronous: the consumer in this process keeps running while `client` waits.
const client = async (addr, ...args) =>
  (await promisify(execFile)(CLIENT, ['--bootstrap', addr, ...args])).stdout

async function main() {
  const { broker, addr } = await startBroker()
  const kafka = new Kafka({ brokers: [addr], logLevel: process.env.DEBUG ? logLevel.INFO : logLevel.NOTHING })
  try {
    await client(addr, 'topics', 'create', 'orders', '--partitions', '3')
    const producer = kafka.producer()
    await producer.connect()
    const messages = Array.from({ length: 100 }, (_, i) => ({ key: `customer-${i % 7}`, value: 'paid' }))
    await producer.send({ topic: 'orders', messages })
    await producer.disconnect()

    // The service under test: here, a consumer of group billing that reads everything. kafkajs'
    // disconnect() waits for the fetch in flight, up to maxWaitTimeInMs (5 s by default).
    const consumer = kafka.consumer({ groupId: 'billing', maxWaitTimeInMs: 100 })
    await consumer.connect()
    await consumer.subscribe({ topic: 'orders', fromBeginning: true })
    await consumer.run({ eachMessage: async () => {} })

    await client(addr, 'groups', 'wait', 'billing', '--max-lag', '0', '--topic', 'orders', '--timeout', '30')
    const lag = JSON.parse(await client(addr, 'groups', 'lag', 'billing', '--format', 'json'))
    assert.strictEqual(lag.total_lag, 0)
    assert.strictEqual(lag.partitions.length, 3)
    await consumer.disconnect()
  } finally {
    broker.kill('SIGTERM')
  }
}

main().then(() => console.log('ok readme-node: the README\'s Node test passed'), e => {
  console.error(e)
  process.exit(1)
})
