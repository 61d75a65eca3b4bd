// One kafkajs 2.2.4 consumer-group member, driven by groups_interop.py; the same line protocol as
// group_member.py:
//
//   node member.js HOST:PORT TOPIC GROUP CLIENT_ID
//
// stdout, one JSON object per line:
//   {"ev":"assigned","member":ID,"partitions":[..],"protocol":NAME}  after every join (GROUP_JOIN)
//   {"ev":"rec","p":P,"o":O,"k":KEY,"v":VALUE}                        every record
//   {"ev":"commit","offsets":{P:O}}                                   after every commit
//   {"ev":"error","msg":...} / {"ev":"closed"}
// "leave" on stdin disconnects the consumer, which sends LeaveGroup.
//
// kafkajs's default (and only built-in) assignor is RoundRobinAssigner. Offsets are committed by
// kafkajs itself after every batch (autoCommitThreshold 1), heartbeats every 500 ms and fetches
// wait at most 500 ms, so rebalances are noticed quickly.
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, groupId, clientId] = process.argv.slice(2)
const emit = ev => process.stdout.write(JSON.stringify(ev) + '\n')
const debug = process.env.INTEROP_DEBUG === '1'

const kafka = new Kafka({
  clientId,
  brokers: [bootstrap],
  logLevel: debug ? logLevel.DEBUG : logLevel.WARN,
  logCreator: () => ({ namespace, level, label, log }) =>
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`),
  retry: { retries: 5 },
})

const consumer = kafka.consumer({
  groupId,
  heartbeatInterval: 500,
  sessionTimeout: 10000,
  maxWaitTimeInMs: 500,
})

consumer.on(consumer.events.GROUP_JOIN, ({ payload }) =>
  emit({
    ev: 'assigned',
    member: payload.memberId,
    partitions: [...(payload.memberAssignment[topic] || [])].sort((a, b) => a - b),
    protocol: payload.groupProtocol,
    leader: payload.isLeader,
  })
)
consumer.on(consumer.events.COMMIT_OFFSETS, ({ payload }) => {
  const offsets = {}
  for (const t of payload.topics) for (const p of t.partitions) offsets[p.partition] = Number(p.offset)
  emit({ ev: 'commit', offsets })
})
consumer.on(consumer.events.CRASH, ({ payload }) => emit({ ev: 'error', msg: `crash: ${payload.error}` }))

let leaving = false
async function leave() {
  if (leaving) return
  leaving = true
  try {
    await consumer.disconnect() // commits resolved offsets, then LeaveGroup
    process.stdout.write(JSON.stringify({ ev: 'closed' }) + '\n', () => process.exit(0))
  } catch (e) {
    emit({ ev: 'error', msg: `disconnect: ${e}` })
    process.exit(1)
  }
}

readline.createInterface({ input: process.stdin }).on('line', line => {
  if (line.trim() === 'leave') leave()
}).on('close', leave)

async function main() {
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  emit({ ev: 'started', client: `kafkajs ${require('kafkajs/package.json').version}` })
  await consumer.run({
    autoCommit: true,
    autoCommitThreshold: 1,
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        emit({
          ev: 'rec',
          p: batch.partition,
          o: Number(m.offset),
          k: m.key === null ? null : m.key.toString('utf8'),
          v: m.value === null ? null : m.value.toString('utf8'),
        })
      }
    },
  })
}

main().catch(e => {
  emit({ ev: 'error', msg: String(e && e.stack ? e.stack : e) })
  process.exit(1)
})
