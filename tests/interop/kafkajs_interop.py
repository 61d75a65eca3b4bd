"""Interop scenarios for kafkajs 2.2.4 (npm, tests/interop/kafkajs/), one per process.

kafkajs/driver.js performs one kafkajs action per run (admin, producer, group consumer) and prints
its result as JSON; the checks are made here, exactly as for the other clients (see
interop_common), and keyed records are read back independently with kafka-python too. kafkajs
implements no flexible version at all and ignores the broker's minimum versions, so every request
here is an old, non-flexible one (Produce 7, Fetch 11, Metadata 6, CreateTopics 3, ...).
kafkajs 2.x's DefaultPartitioner is Java's murmur2; its core has only gzip among the codecs.
"""

import json
import os
import subprocess

from kafka import KafkaConsumer, TopicPartition

import interop_common as c
from interop_common import check, check_eq

CLIENT = "kafkajs"
HERE = os.path.dirname(os.path.abspath(__file__))
NODE = os.environ.get("NODE", "node")
TS_BASE = 1_700_000_000_000


def kafkajs(action, bootstrap, topic, *args, stdin=None, timeout=60):
    cmd = [NODE, os.path.join(HERE, "kafkajs", "driver.js"), action, bootstrap, topic, *map(str, args)]
    print("$", " ".join(cmd), flush=True)
    env = dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1")
    try:
        r = subprocess.run(cmd, input=json.dumps(stdin) if stdin is not None else "", capture_output=True,
                           text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise c.Fail(f"kafkajs {action} did not finish within {timeout}s") from None
    if r.stderr:
        print(r.stderr[-4000:], flush=True)
    lines = r.stdout.strip().splitlines()
    check(lines, f"kafkajs {action} printed nothing (exit {r.returncode}); stderr: {r.stderr[-1000:]!r}")
    out = json.loads(lines[-1])
    check(r.returncode == 0 and "error" not in out, f"kafkajs {action} failed: {out.get('error')} ({out.get('type')})")
    return out


def _produce(bootstrap, topic, messages, compression=None):
    res = kafkajs("produce", bootstrap, topic, stdin={"messages": messages, "compression": compression,
                                                      "idempotent": c.IDEMPOTENCE})["result"]
    for r in res:
        check_eq((r["topicName"], r["errorCode"]), (topic, 0), f"send() result for partition {r['partition']}")
    return {r["partition"]: int(r["baseOffset"]) for r in res}


def _read(bootstrap, topic, counts):
    """kafka-python, assign mode, partition by partition, counts {partition: n}:
    (partition, offset, key, value) of exactly n records from offset 0 of each."""
    cons = KafkaConsumer(bootstrap_servers=bootstrap, client_id="interop-kafkajs-check", group_id=None,
                         enable_auto_commit=False, auto_offset_reset="none")
    out = []
    for p, n in sorted(counts.items()):
        tp = TopicPartition(topic, p)
        cons.assign([tp])
        cons.seek(tp, 0)
        got = []
        for _ in range(100):
            if len(got) >= n:
                break
            for recs in cons.poll(timeout_ms=300).values():
                got.extend(recs)
        check_eq(len(got), n, f"records read back from partition {p} (kafka-python)")
        out += [(r.partition, r.offset, r.key.decode(), r.value.decode()) for r in got]
    cons.close()
    return out


def create_topic(bootstrap, topic):
    check_eq(kafkajs("create", bootstrap, topic, c.PARTITIONS)["created"], True, "createTopics result")
    check_eq(kafkajs("create", bootstrap, topic, c.PARTITIONS)["created"], False,
             "a second createTopics (false: TOPIC_ALREADY_EXISTS)")
    md = kafkajs("metadata", bootstrap, topic)
    [t] = md["metadata"]["topics"]
    check_eq(sorted(p["partitionId"] for p in t["partitions"]), list(range(c.PARTITIONS)), "partitions")
    return f"{topic} created with {c.PARTITIONS} partitions; a second createTopics returned false (TOPIC_ALREADY_EXISTS)"


def metadata(bootstrap, topic):
    md = kafkajs("metadata", bootstrap, topic)
    brokers = md["cluster"]["brokers"]
    check_eq(len(brokers), 1, "number of brokers (describeCluster)")
    b = brokers[0]
    check_eq(f"{b['host']}:{b['port']}", bootstrap, "advertised broker address")
    check_eq(md["cluster"]["controller"], b["nodeId"], "controller")
    check(md["cluster"]["clusterId"], "clusterId is empty")
    check(topic in md["topics"], f"{topic} missing from listTopics")
    [t] = md["metadata"]["topics"]
    for p in t["partitions"]:
        check_eq((p["partitionErrorCode"], p["leader"], p["replicas"], p["isr"]), (0, b["nodeId"], [b["nodeId"]], [b["nodeId"]]),
                 f"error/leader/replicas/isr of partition {p['partitionId']}")
    return f"describeCluster: 1 broker {bootstrap} (id {b['nodeId']}, controller), {topic} with {c.PARTITIONS} partitions led by it"


def produce_keyed(bootstrap, topic):
    base = _produce(bootstrap, topic, [{"key": k, "value": c.value_for(CLIENT, k)} for k in c.KEYS])
    counts = c.expected_counts()
    check_eq(base, {p: 0 for p, n in counts.items() if n}, "base offset per partition in send()'s result")
    records = _read(bootstrap, topic, counts)
    summary = c.check_keyed_log(records, CLIENT)
    c.check_send_order(records, c.KEYS)
    return "DefaultPartitioner, read back with kafka-python: " + summary + ", in send order"


def read_back(bootstrap, topic):
    recs = kafkajs("consume", bootstrap, topic, topic + "-reader", len(c.KEYS))["records"]
    return "group consumer from the beginning: " + c.check_keyed_log(
        [(r["p"], r["o"], r["k"], r["v"]) for r in recs], CLIENT)


def end_offsets(bootstrap, topic):
    offs = kafkajs("offsets", bootstrap, topic)["offsets"]
    check_eq({o["partition"]: int(o["high"]) for o in offs}, c.expected_counts(), "fetchTopicOffsets high")
    check_eq({o["partition"]: int(o["low"]) for o in offs}, {p: 0 for p in range(c.PARTITIONS)}, "fetchTopicOffsets low")
    return f"fetchTopicOffsets: high = records produced per partition (sum {sum(int(o['high']) for o in offs)}), low = 0"


def grow_24(bootstrap, topic):
    res = kafkajs("grow", bootstrap, topic, c.GROWN_PARTITIONS)
    [t] = res["metadata"]["topics"]
    check_eq(len(t["partitions"]), c.GROWN_PARTITIONS, "partitions after createPartitions")
    value = f"{CLIENT}|{c.GROW_KEY}|after-grow"
    base = _produce(bootstrap, topic, [{"key": c.GROW_KEY, "value": value}])
    check_eq(base, {c.GROW_KEY_PARTITION_24: 0}, f"partition/offset of {c.GROW_KEY} after growing to 24")
    offs = kafkajs("offsets", bootstrap, topic)["offsets"]
    check_eq({o["partition"]: int(o["high"]) for o in offs}, c.expected_grown_end_offsets(), "fetchTopicOffsets of the 24 partitions")
    check_eq(_read(bootstrap, topic, {c.GROW_KEY_PARTITION_24: 1}), [(c.GROW_KEY_PARTITION_24, 0, c.GROW_KEY, value)],
             f"contents of partition {c.GROW_KEY_PARTITION_24} (kafka-python)")
    return f"{topic} now has 24 partitions; kafkajs put {c.GROW_KEY} in partition 16 offset 0; end offsets exact"


def timestamp_lookup(bootstrap, topic):
    t = topic + "-ts"
    check_eq(kafkajs("create", bootstrap, t, 1)["created"], True, "createTopics result")
    base = _produce(bootstrap, t, [{"key": f"ts-{i}", "value": f"v{i}", "partition": 0, "timestamp": TS_BASE + i * 1000}
                                   for i in range(10)])
    check_eq(base, {0: 0}, "base offset")
    # kafkajs turns Kafka's -1 (no record at or after the time) into the high watermark
    cases = {TS_BASE - 5000: 0, TS_BASE: 0, TS_BASE + 3000: 3, TS_BASE + 3500: 4, TS_BASE + 9000: 9, TS_BASE + 9001: 10}
    for ts, want in cases.items():
        offs = kafkajs("offsets-by-ts", bootstrap, t, ts)["offsets"]
        check_eq([(o["partition"], int(o["offset"])) for o in offs], [(0, want)], f"fetchTopicOffsetsByTimestamp({ts})")
    recs = kafkajs("consume", bootstrap, t, t + "-reader", 10)["records"]
    check_eq([(r["o"], r["k"], r["ts"]) for r in recs], [(i, f"ts-{i}", TS_BASE + i * 1000) for i in range(10)],
             "offsets, keys and CreateTimes read back")
    return "fetchTopicOffsetsByTimestamp exact for 6 timestamps (past the end: the high watermark, as kafkajs maps -1)"


def compression(bootstrap, topic):
    t = topic + "-z"
    check_eq(kafkajs("create", bootstrap, t, 1)["created"], True, "createTopics result")
    n = c.COMPRESSED_RECORDS
    base = _produce(bootstrap, t, [{"key": f"k{i}", "value": c.compressed_value(CLIENT, "gzip", i)} for i in range(n)],
                    compression="gzip")
    check_eq(base, {0: 0}, "base offset")
    records = _read(bootstrap, t, {0: n})
    check_eq([(o, k, v) for _, o, k, v in records], [(i, f"k{i}", c.compressed_value(CLIENT, "gzip", i)) for i in range(n)],
             "gzip: offsets, keys and values read back (kafka-python)")
    note = c.check_codec_batches(bootstrap, t, 0, "gzip", n)
    return f"{n} gzip records read back exactly: {note} (snappy/lz4/zstd need kafkajs codec plugins: not tested)"


if __name__ == "__main__":
    c.run({
        "create-topic": create_topic,
        "metadata": metadata,
        "produce-keyed": produce_keyed,
        "read-back": read_back,
        "end-offsets": end_offsets,
        "grow-24": grow_24,
        "timestamp-lookup": timestamp_lookup,
        "compression": compression,
    }, __doc__)
