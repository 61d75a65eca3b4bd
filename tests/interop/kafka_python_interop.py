"""Interop scenarios for kafka-python (newest 3.x from PyPI), one per process; see interop_common."""

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

import interop_common as c
from interop_common import check, check_eq

CLIENT = "kafka-python"
TS_BASE = 1_700_000_000_000  # CreateTime of the first record of the timestamp scenario


def _admin(bootstrap):
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-kafka-python-admin",
                            request_timeout_ms=15000)


def _producer(bootstrap, **kw):
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="interop-kafka-python",
        acks="all",
        linger_ms=5,
        # kafka-python 3.x defaults to True; see IDEMPOTENCE in interop_common.
        enable_idempotence=c.IDEMPOTENCE,
        key_serializer=lambda s: s.encode(),
        value_serializer=lambda s: s.encode(),
        **kw,
    )


def _consumer(bootstrap):
    # No group: assign() only, nothing committed (consumer groups are not implemented yet).
    return KafkaConsumer(bootstrap_servers=bootstrap, client_id="interop-kafka-python",
                         group_id=None, enable_auto_commit=False, auto_offset_reset="none",
                         request_timeout_ms=15000)


def _create(bootstrap, topic, partitions):
    admin = _admin(bootstrap)
    res = admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    check_eq([(t["name"], t["error_code"]) for t in res["topics"]], [(topic, 0)], "CreateTopics result")
    admin.wait_for_topics([topic], timeout_ms=10000)
    admin.close()


def _read_partition(consumer, tp, n, timeout=30.0):
    """Reads partition tp from offset 0 until n records arrived; returns the records."""
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            got.extend(recs)
    # one more short poll: nothing beyond the n records may exist
    for recs in consumer.poll(timeout_ms=300).values():
        got.extend(recs)
    check_eq(len(got), n, f"records read from partition {tp.partition}")
    check_eq([r.offset for r in got], list(range(n)), f"offsets read from partition {tp.partition}")
    return got


def _topic_partitions(admin, topic):
    topics = admin.describe_topics([topic])
    check_eq(len(topics), 1, "topics described")
    t = topics[0]
    check_eq(t["error_code"], 0, f"describe_topics error code for {topic}")
    return t["partitions"]


def create_topic(bootstrap, topic):
    admin = _admin(bootstrap)
    res = admin.create_topics({topic: {"num_partitions": c.PARTITIONS, "replication_factor": 1}})
    check_eq([(t["name"], t["error_code"]) for t in res["topics"]], [(topic, 0)],
             "CreateTopics result")
    admin.wait_for_topics([topic], timeout_ms=10000)
    parts = _topic_partitions(admin, topic)
    check_eq(sorted(p["partition_index"] for p in parts), list(range(c.PARTITIONS)),
             "partitions in metadata")
    # creating it again must be refused with TOPIC_ALREADY_EXISTS (36)
    res = admin.create_topics({topic: {"num_partitions": c.PARTITIONS, "replication_factor": 1}},
                              raise_errors=False)
    check_eq([t["error_code"] for t in res["topics"]], [36], "error code of a second CreateTopics")
    admin.close()
    return f"{topic} created with {c.PARTITIONS} partitions; a second create got TOPIC_ALREADY_EXISTS"


def metadata(bootstrap, topic):
    admin = _admin(bootstrap)
    cl = admin.describe_cluster()
    brokers = cl["brokers"]
    check_eq(len(brokers), 1, "number of brokers")
    b = brokers[0]
    check_eq(f"{b['host']}:{b['port']}", bootstrap, "advertised broker address")
    check_eq(cl["controller_id"], b["broker_id"], "controller id")
    check(topic in admin.list_topics(), f"{topic} missing from list_topics()")
    parts = _topic_partitions(admin, topic)
    check_eq(len(parts), c.PARTITIONS, "partition count")
    for p in parts:
        check_eq((p["error_code"], p["leader_id"], list(p["replica_nodes"]), list(p["isr_nodes"])),
                 (0, b["broker_id"], [b["broker_id"]], [b["broker_id"]]),
                 f"error/leader/replicas/isr of partition {p['partition_index']}")
    admin.close()
    cons = _consumer(bootstrap)
    check(topic in cons.topics(), f"{topic} missing from KafkaConsumer.topics()")
    check_eq(cons.partitions_for_topic(topic), set(range(c.PARTITIONS)), "partitions_for_topic")
    cons.close()
    return (f"1 broker {bootstrap} (id {b['broker_id']}, controller), {topic} listed with "
            f"{c.PARTITIONS} partitions led by it")


def produce_keyed(bootstrap, topic):
    prod = _producer(bootstrap)  # default partitioner: Java's murmur2
    futs = [(k, prod.send(topic, key=k, value=c.value_for(CLIENT, k))) for k in c.KEYS]
    prod.flush(timeout=30)
    by_part = {}
    for k, f in futs:
        md = f.get(timeout=30)
        want = c.partition_for_key(k, c.PARTITIONS)
        check_eq(md.partition, want, f"partition the producer chose for {k}")
        by_part.setdefault(md.partition, []).append(md.offset)
    for p, offs in by_part.items():
        check_eq(offs, list(range(len(offs))), f"acknowledged offsets of partition {p}, in send order")
    prod.close()
    return (f"{len(futs)} records acknowledged, each in its murmur2 partition, "
            f"offsets 0..n-1 in send order on {len(by_part)} partitions")


def read_back(bootstrap, topic):
    cons = _consumer(bootstrap)
    counts = c.expected_counts()
    records = []
    for p in range(c.PARTITIONS):
        for r in _read_partition(cons, TopicPartition(topic, p), counts[p]):
            records.append((r.partition, r.offset, r.key.decode(), r.value.decode()))
    cons.close()
    return "per-partition reads: " + c.check_keyed_log(records, CLIENT)


def end_offsets(bootstrap, topic):
    cons = _consumer(bootstrap)
    tps = [TopicPartition(topic, p) for p in range(c.PARTITIONS)]
    ends = {tp.partition: o for tp, o in cons.end_offsets(tps).items()}
    begins = {tp.partition: o for tp, o in cons.beginning_offsets(tps).items()}
    cons.close()
    check_eq(ends, c.expected_counts(), "end offsets (ListOffsets latest)")
    check_eq(begins, {p: 0 for p in range(c.PARTITIONS)}, "beginning offsets (ListOffsets earliest)")
    return f"latest = records produced per partition (sum {sum(ends.values())}), earliest = 0"


def grow_24(bootstrap, topic):
    admin = _admin(bootstrap)
    resp = admin.create_partitions({topic: c.GROWN_PARTITIONS})
    check_eq([(r.name, r.error_code) for r in resp.results], [(topic, 0)], "CreatePartitions result")
    c.wait_until(lambda: len(_topic_partitions(admin, topic)) == c.GROWN_PARTITIONS, 10,
                 f"{c.GROWN_PARTITIONS} partitions in metadata")
    admin.close()
    prod = _producer(bootstrap)
    c.wait_until(lambda: len(prod.partitions_for(topic)) == c.GROWN_PARTITIONS, 10,
                 "producer metadata with 24 partitions")
    value = f"{CLIENT}|{c.GROW_KEY}|after-grow"
    md = prod.send(topic, key=c.GROW_KEY, value=value).get(timeout=30)
    prod.close()
    check_eq((md.partition, md.offset), (c.GROW_KEY_PARTITION_24, 0),
             f"partition/offset of {c.GROW_KEY} after growing to 24")
    cons = _consumer(bootstrap)
    tps = [TopicPartition(topic, p) for p in range(c.GROWN_PARTITIONS)]
    ends = {tp.partition: o for tp, o in cons.end_offsets(tps).items()}
    check_eq(ends, c.expected_grown_end_offsets(), "end offsets of the 24 partitions")
    recs = _read_partition(cons, TopicPartition(topic, c.GROW_KEY_PARTITION_24), 1)
    check_eq((recs[0].key.decode(), recs[0].value.decode()), (c.GROW_KEY, value),
             f"record in partition {c.GROW_KEY_PARTITION_24}")
    cons.close()
    return f"{topic} now has 24 partitions; {c.GROW_KEY} went to partition 16 offset 0; end offsets exact"


def timestamp_lookup(bootstrap, topic):
    t = topic + "-ts"
    _create(bootstrap, t, 1)
    prod = _producer(bootstrap)
    futs = [prod.send(t, key=f"ts-{i}", value=f"v{i}", partition=0, timestamp_ms=TS_BASE + i * 1000)
            for i in range(10)]
    prod.flush(timeout=30)
    check_eq([f.get(timeout=30).offset for f in futs], list(range(10)), "acknowledged offsets")
    prod.close()
    cons = _consumer(bootstrap)
    tp = TopicPartition(t, 0)
    cases = {TS_BASE - 5000: (0, TS_BASE), TS_BASE: (0, TS_BASE),
             TS_BASE + 3000: (3, TS_BASE + 3000), TS_BASE + 3500: (4, TS_BASE + 4000),
             TS_BASE + 9000: (9, TS_BASE + 9000)}
    for ts, want in cases.items():
        got = cons.offsets_for_times({tp: ts})[tp]
        check(got is not None, f"offsets_for_times({ts}) returned None")
        check_eq((got.offset, got.timestamp), want, f"offsets_for_times({ts}) offset/timestamp")
    check_eq(cons.offsets_for_times({tp: TS_BASE + 9001})[tp], None,
             "offsets_for_times past the last timestamp (Kafka answers offset -1)")
    recs = _read_partition(cons, tp, 10)
    check_eq([(r.timestamp, r.timestamp_type) for r in recs],
             [(TS_BASE + i * 1000, 0) for i in range(10)], "timestamps and types (CreateTime) read back")
    cons.close()
    return "offsets_for_times exact for 6 timestamps (before, equal, between, last, past the end)"


def compression(bootstrap, topic):
    t = topic + "-z"
    _create(bootstrap, t, len(c.CODECS))
    n = c.COMPRESSED_RECORDS
    notes = []
    cons = _consumer(bootstrap)
    for p, codec in enumerate(c.CODECS):
        prod = _producer(bootstrap, compression_type=codec)
        futs = [prod.send(t, key=f"k{i}", value=c.compressed_value(CLIENT, codec, i), partition=p)
                for i in range(n)]
        prod.flush(timeout=30)
        check_eq([f.get(timeout=30).offset for f in futs], list(range(n)), f"{codec}: acknowledged offsets")
        prod.close()
        recs = _read_partition(cons, TopicPartition(t, p), n)
        check_eq([(r.key.decode(), r.value.decode()) for r in recs],
                 [(f"k{i}", c.compressed_value(CLIENT, codec, i)) for i in range(n)],
                 f"{codec}: keys and values read back")
        notes.append(c.check_codec_batches(bootstrap, t, p, codec, n))
    cons.close()
    return f"{n} records each read back exactly: " + "; ".join(notes)


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
