// A kafkajs 2.2.4 idempotent producer that lives across a leader move, driven by
// cluster_interop.py over stdin/stdout (one JSON object per line):
//
//   node cluster_producer.js HOST:PORT TOPIC
//
// stdin:  "send PREFIX N"  sends PREFIX-0..PREFIX-(N-1), keyed by themselves, and waits for acks
// stdout: {"ev":"ready"} once connected, {"ev":"sent","prefix":P,"count":N} after each wave,
//         {"ev":"error","msg":...} on a failure (then it exits 1)
//
// Its metadata is whatever it learned before the move: the second wave meets
// NOT_LEADER_OR_FOLLOWER at the old leaders, and kafkajs must re-read metadata and retry.
'use strict'

const readline = require('readline')
const { Kafka, Partitioners, logLevel } = require('kafkajs')

const [bootstrap, topic] = process.argv.slice(2)
const emit = ev => process.stdout.write(JSON.stringify(ev) + '\n')

const kafka = new Kafka({
  clientId: 'cluster-interop-kafkajs',
  brokers: [bootstrap],
  logLevel: process.env.INTEROP_DEBUG === '1' ? logLevel.DEBUG : logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) =>
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`),
  retry: { retries: 10, initialRetryTime: 100 },
})
const producer = kafka.producer({
  idempotent: true,
  maxInFlightRequests: 1,
  createPartitioner: Partitioners.DefaultPartitioner, // Java's murmur2
})

async function send(prefix, n) {
  const messages = []
  for (let i = 0; i < n; i++) messages.push({ key: `${prefix}-${i}`, value: `${prefix}-${i}` })
  // Batches of 50, so one wave is several requests to every leader.
  for (let at = 0; at < n; at += 50) {
    await producer.send({ topic, acks: -1, messages: messages.slice(at, at + 50) })
  }
  emit({ ev: 'sent', prefix, count: n })
}

async function main() {
  await producer.connect()
  emit({ ev: 'ready' })
  const lines = readline.createInterface({ input: process.stdin })
  for await (const line of lines) {
    const [verb, prefix, n] = line.trim().split(/\s+/)
    if (verb === 'send') await send(prefix, Number(n))
  }
  await producer.disconnect()
}

main().catch(e => {
  emit({ ev: 'error', msg: String(e && e.stack ? e.stack : e) })
  process.exit(1)
})
