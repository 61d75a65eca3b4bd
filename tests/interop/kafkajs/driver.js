// kafkajs 2.2.4 actions for kafkajs_interop.py: one action per run, its result as one JSON line on
// stdout (errors: {"error": ..., "type": ...} and exit 1). The checks are made in Python.
//
//   node driver.js ACTION HOST:PORT TOPIC [ARGS...]
//
//   create TOPIC N             admin.createTopics (true, or false when it already exists)
//   metadata TOPIC             admin.describeCluster, listTopics, fetchTopicMetadata
//   produce TOPIC              producer.send of the JSON on stdin:
//                              {"messages": [{key, value, partition?, timestamp?}], "compression": "gzip"|null,
//                               "idempotent": bool}; default partitioner (Java-compatible in 2.x)
//   offsets TOPIC              admin.fetchTopicOffsets
//   offsets-by-ts TOPIC MS     admin.fetchTopicOffsetsByTimestamp
//   grow TOPIC N               admin.createPartitions, then fetchTopicMetadata
//   consume TOPIC GROUP N      a group consumer from the beginning until N records, then disconnect
//                              (read_committed: kafkajs's default readUncommitted=false)
//   txn-produce TOPIC TXN_ID   a transactional producer: for each {messages, offsets?, commit} of
//                              the JSON list on stdin, one transaction that sends the messages,
//                              sends the offsets ({group, partition, offset}) and commits or aborts
'use strict'

const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const [action, bootstrap, topic, ...rest] = process.argv.slice(2)
const debug = process.env.INTEROP_DEBUG === '1'
const kafka = new Kafka({
  clientId: 'interop-kafkajs',
  brokers: [bootstrap],
  logLevel: debug ? logLevel.DEBUG : logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) =>
    process.stderr.write(`${label} [${namespace}] ${JSON.stringify(log)}\n`),
  retry: { retries: 3 },
})

const readStdin = () =>
  new Promise((resolve, reject) => {
    let data = ''
    process.stdin.setEncoding('utf8')
    process.stdin.on('data', d => (data += d))
    process.stdin.on('end', () => resolve(data))
    process.stdin.on('error', reject)
  })

async function withAdmin(fn) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

const actions = {
  create: () =>
    withAdmin(async admin => ({
      created: await admin.createTopics({ topics: [{ topic, numPartitions: Number(rest[0]) }] }),
    })),

  metadata: () =>
    withAdmin(async admin => ({
      cluster: await admin.describeCluster(),
      topics: await admin.listTopics(),
      metadata: await admin.fetchTopicMetadata({ topics: [topic] }),
    })),

  produce: async () => {
    const spec = JSON.parse(await readStdin())
    const producer = kafka.producer({
      idempotent: !!spec.idempotent,
      maxInFlightRequests: spec.idempotent ? 1 : undefined,
      allowAutoTopicCreation: false,
    })
    await producer.connect()
    try {
      const result = await producer.send({
        topic,
        acks: -1,
        compression: spec.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None,
        messages: spec.messages.map(m => ({
          key: m.key,
          value: m.value,
          partition: m.partition,
          timestamp: m.timestamp === undefined ? undefined : String(m.timestamp),
        })),
      })
      return { result }
    } finally {
      await producer.disconnect()
    }
  },

  'txn-produce': async () => {
    const transactions = JSON.parse(await readStdin())
    const producer = kafka.producer({
      transactionalId: rest[0],
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    })
    await producer.connect()
    const results = []
    try {
      for (const spec of transactions) {
        const txn = await producer.transaction()
        const sent = await txn.send({
          topic,
          acks: -1,
          messages: spec.messages.map(m => ({ key: m.key, value: m.value, partition: m.partition })),
        })
        if (spec.offsets) {
          await txn.sendOffsets({
            consumerGroupId: spec.offsets.group,
            topics: [
              {
                topic,
                partitions: [{ partition: spec.offsets.partition, offset: String(spec.offsets.offset) }],
              },
            ],
          })
        }
        if (spec.commit) await txn.commit()
        else await txn.abort()
        results.push(sent)
      }
      return { results }
    } finally {
      await producer.disconnect()
    }
  },

  offsets: () => withAdmin(async admin => ({ offsets: await admin.fetchTopicOffsets(topic) })),

  'offsets-by-ts': () =>
    withAdmin(async admin => ({
      offsets: await admin.fetchTopicOffsetsByTimestamp(topic, Number(rest[0])),
    })),

  grow: () =>
    withAdmin(async admin => {
      // resolves to nothing in 2.2.4; a refusal (e.g. INVALID_PARTITIONS) throws
      await admin.createPartitions({ topicPartitions: [{ topic, count: Number(rest[0]) }] })
      return { metadata: await admin.fetchTopicMetadata({ topics: [topic] }) }
    }),

  consume: async () => {
    const [groupId, n] = [rest[0], Number(rest[1])]
    const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 500, heartbeatInterval: 500 })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    const records = []
    let done
    const finished = new Promise(resolve => (done = resolve))
    await consumer.run({
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          records.push({
            p: batch.partition,
            o: Number(m.offset),
            k: m.key === null ? null : m.key.toString('utf8'),
            v: m.value === null ? null : m.value.toString('utf8'),
            ts: Number(m.timestamp),
          })
        }
        if (records.length >= n) done()
      },
    })
    const timer = setTimeout(done, 30000)
    await finished
    clearTimeout(timer)
    await new Promise(r => setTimeout(r, 500)) // anything beyond n shows up now
    await consumer.disconnect()
    return { records }
  },
}

// exit only once stdout is flushed: a pipe takes 64 KiB at a time
const finish = (out, code) => process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(code))

async function main() {
  if (!actions[action]) throw new Error(`unknown action ${action}`)
  return actions[action]()
}

main().then(
  out => finish(out, 0),
  e => finish({ error: String(e), type: e.type || null }, 1)
)
