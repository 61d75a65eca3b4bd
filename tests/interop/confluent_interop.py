"""Interop scenarios for confluent-kafka (PyPI, bundled librdkafka), one per process; see interop_common."""

import concurrent.futures
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

import interop_common as c
from interop_common import check, check_eq

CLIENT = "confluent-kafka"
TS_BASE = 1_700_000_000_000


def _conf(bootstrap, **kw):
    conf = {"bootstrap.servers": bootstrap, "client.id": "interop-confluent"}
    if c.DEBUG:
        conf["debug"] = "protocol,broker,topic,msg,fetch,admin"
    conf.update(kw)
    return conf


def _admin(bootstrap):
    return AdminClient(_conf(bootstrap))


def _producer(bootstrap, **kw):
    return Producer(_conf(
        bootstrap,
        **{"partitioner": "murmur2_random",  # Java's partitioner (librdkafka defaults to CRC32)
           "acks": "all",
           "linger.ms": 5,
           # see IDEMPOTENCE in interop_common
           "enable.idempotence": c.IDEMPOTENCE},
        **kw))


def _consumer(bootstrap):
    # confluent-kafka insists on a group.id, but only assign() is used: no subscribe, no commit,
    # explicit start offsets, so no group request is needed (groups are not implemented yet).
    return Consumer(_conf(bootstrap, **{"group.id": "interop-confluent-assign-only",
                                        "enable.auto.commit": False,
                                        "enable.auto.offset.store": False,
                                        "enable.partition.eof": True,
                                        "auto.offset.reset": "error"}))


def _wait(futures, what):
    for key, f in futures.items():
        try:
            f.result(timeout=20)
        except KafkaException as e:
            raise c.Fail(f"{what} {key}: {e.args[0]}") from None
        except concurrent.futures.TimeoutError:
            raise c.Fail(f"{what} {key}: no answer within 20 s") from None


def _produce(prod, items, timeout=30):
    """items: list of (topic, key, value, kwargs). Returns delivery reports in send order as
    (partition, offset, timestamp) tuples; fails on any delivery error."""
    reports = [None] * len(items)

    def cb_for(i):
        def cb(err, msg):
            reports[i] = err if err is not None else (msg.partition(), msg.offset(), msg.timestamp())
        return cb

    for i, (topic, key, value, kw) in enumerate(items):
        prod.produce(topic, key=key, value=value, on_delivery=cb_for(i), **kw)
        prod.poll(0)
    left = prod.flush(timeout)
    check_eq(left, 0, "messages still undelivered after flush")
    for i, r in enumerate(reports):
        check(isinstance(r, tuple), f"delivery of message {i} ({items[i][1]}): {r}")
    return reports


def _create(bootstrap, topic, partitions):
    admin = _admin(bootstrap)  # keep a reference: a collected AdminClient fails its futures
    _wait(admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=10),
        "create_topics")


def _read_partition(cons, topic, p, n, timeout=30.0):
    """Reads partition p from offset 0 until librdkafka reports partition EOF (which it derives
    from the Fetch high watermark); returns the messages."""
    cons.assign([TopicPartition(topic, p, 0)])
    got = []
    deadline = time.monotonic() + timeout
    while True:
        check(time.monotonic() < deadline,
              f"no partition EOF on {topic}[{p}] within {timeout}s ({len(got)} of {n} records read)")
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF and m.partition() == p:
                break
            raise c.Fail(f"consumer error on {topic}[{p}]: {m.error()}")
        got.append(m)
    cons.unassign()
    check_eq(len(got), n, f"records read from partition {p} before EOF")
    check_eq([m.offset() for m in got], list(range(n)), f"offsets read from partition {p}")
    return got


def _topic_md(admin, topic):
    md = admin.list_topics(topic=topic, timeout=10)
    tmd = md.topics.get(topic)
    check(tmd is not None, f"{topic} missing from metadata")
    check(tmd.error is None, f"metadata error for {topic}: {tmd.error}")
    return md, tmd


def create_topic(bootstrap, topic):
    admin = _admin(bootstrap)
    _wait(admin.create_topics([NewTopic(topic, num_partitions=c.PARTITIONS, replication_factor=1)],
                              operation_timeout=10), "create_topics")
    _, tmd = _topic_md(admin, topic)
    check_eq(sorted(tmd.partitions), list(range(c.PARTITIONS)), "partitions in metadata")
    f = admin.create_topics([NewTopic(topic, num_partitions=c.PARTITIONS, replication_factor=1)])[topic]
    try:
        f.result(timeout=20)
        raise c.Fail("a second create_topics of the same name succeeded")
    except KafkaException as e:
        check_eq(e.args[0].code(), KafkaError.TOPIC_ALREADY_EXISTS, "error of a second create_topics")
    return f"{topic} created with {c.PARTITIONS} partitions; a second create got TOPIC_ALREADY_EXISTS"


def metadata(bootstrap, topic):
    admin = _admin(bootstrap)
    md = admin.list_topics(timeout=10)  # all topics
    check_eq(len(md.brokers), 1, "number of brokers")
    b = next(iter(md.brokers.values()))
    check_eq(f"{b.host}:{b.port}", bootstrap, "advertised broker address")
    check_eq(md.controller_id, b.id, "controller id")
    check(topic in md.topics, f"{topic} missing from the all-topics listing")
    tmd = md.topics[topic]
    check_eq(sorted(tmd.partitions), list(range(c.PARTITIONS)), "partitions")
    for p in tmd.partitions.values():
        check_eq((p.error, p.leader, list(p.replicas), list(p.isrs)), (None, b.id, [b.id], [b.id]),
                 f"error/leader/replicas/isrs of partition {p.id}")
    return (f"1 broker {bootstrap} (id {b.id}, controller), {topic} listed with "
            f"{c.PARTITIONS} partitions led by it")


def produce_keyed(bootstrap, topic):
    prod = _producer(bootstrap)
    items = [(topic, k, c.value_for(CLIENT, k), {}) for k in c.KEYS]
    reports = _produce(prod, items)
    by_part = {}
    for k, (p, off, _) in zip(c.KEYS, reports):
        check_eq(p, c.partition_for_key(k, c.PARTITIONS), f"partition of {k} (murmur2_random)")
        by_part.setdefault(p, []).append(off)
    for p, offs in by_part.items():
        check_eq(offs, list(range(len(offs))), f"acknowledged offsets of partition {p}, in send order")
    return (f"{len(items)} records acknowledged, each in its murmur2 partition, "
            f"offsets 0..n-1 in send order on {len(by_part)} partitions")


def read_back(bootstrap, topic):
    cons = _consumer(bootstrap)
    counts = c.expected_counts()
    records = []
    for p in range(c.PARTITIONS):
        for m in _read_partition(cons, topic, p, counts[p]):
            records.append((m.partition(), m.offset(), m.key().decode(), m.value().decode()))
    cons.close()
    return "per-partition reads to EOF: " + c.check_keyed_log(records, CLIENT)


def end_offsets(bootstrap, topic):
    cons = _consumer(bootstrap)
    wm = {p: cons.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
          for p in range(c.PARTITIONS)}
    cons.close()
    check_eq({p: hi for p, (lo, hi) in wm.items()}, c.expected_counts(), "high watermarks (ListOffsets latest)")
    check_eq({p: lo for p, (lo, hi) in wm.items()}, {p: 0 for p in range(c.PARTITIONS)},
             "low watermarks (ListOffsets earliest)")
    return f"high watermark = records produced per partition (sum {sum(h for _, h in wm.values())}), low = 0"


def grow_24(bootstrap, topic):
    admin = _admin(bootstrap)
    _wait(admin.create_partitions([NewPartitions(topic, c.GROWN_PARTITIONS)], operation_timeout=10),
          "create_partitions")
    c.wait_until(lambda: len(_topic_md(admin, topic)[1].partitions) == c.GROWN_PARTITIONS, 10,
                 f"{c.GROWN_PARTITIONS} partitions in metadata")
    prod = _producer(bootstrap)
    value = f"{CLIENT}|{c.GROW_KEY}|after-grow"
    [(p, off, _)] = _produce(prod, [(topic, c.GROW_KEY, value, {})])
    check_eq((p, off), (c.GROW_KEY_PARTITION_24, 0), f"partition/offset of {c.GROW_KEY} after growing to 24")
    cons = _consumer(bootstrap)
    ends = {q: cons.get_watermark_offsets(TopicPartition(topic, q), timeout=10, cached=False)[1]
            for q in range(c.GROWN_PARTITIONS)}
    check_eq(ends, c.expected_grown_end_offsets(), "high watermarks of the 24 partitions")
    [m] = _read_partition(cons, topic, c.GROW_KEY_PARTITION_24, 1)
    check_eq((m.key().decode(), m.value().decode()), (c.GROW_KEY, value),
             f"record in partition {c.GROW_KEY_PARTITION_24}")
    cons.close()
    return f"{topic} now has 24 partitions; {c.GROW_KEY} went to partition 16 offset 0; end offsets exact"


def timestamp_lookup(bootstrap, topic):
    t = topic + "-ts"
    _create(bootstrap, t, 1)
    prod = _producer(bootstrap)
    reports = _produce(prod, [(t, f"ts-{i}", f"v{i}", {"partition": 0, "timestamp": TS_BASE + i * 1000})
                              for i in range(10)])
    check_eq([off for _, off, _ in reports], list(range(10)), "acknowledged offsets")
    cons = _consumer(bootstrap)
    cases = {TS_BASE - 5000: 0, TS_BASE: 0, TS_BASE + 3000: 3, TS_BASE + 3500: 4, TS_BASE + 9000: 9,
             TS_BASE + 9001: -1}  # -1: no record at or after it (Kafka answers offset -1)
    for ts, want in cases.items():
        [r] = cons.offsets_for_times([TopicPartition(t, 0, ts)], timeout=10)
        check(r.error is None, f"offsets_for_times({ts}) error: {r.error}")
        check_eq(r.offset, want, f"offsets_for_times({ts})")
    msgs = _read_partition(cons, t, 0, 10)
    check_eq([m.timestamp() for m in msgs], [(1, TS_BASE + i * 1000) for i in range(10)],
             "(CreateTime, timestamp) read back")
    cons.close()
    return "offsets_for_times exact for 6 timestamps (before, equal, between, last, past the end)"


def compression(bootstrap, topic):
    t = topic + "-z"
    _create(bootstrap, t, len(c.CODECS))
    n = c.COMPRESSED_RECORDS
    cons = _consumer(bootstrap)
    notes = []
    for p, codec in enumerate(c.CODECS):
        prod = _producer(bootstrap, **{"compression.type": codec})
        reports = _produce(prod, [(t, f"k{i}", c.compressed_value(CLIENT, codec, i), {"partition": p})
                                  for i in range(n)])
        check_eq([(q, off) for q, off, _ in reports], [(p, i) for i in range(n)],
                 f"{codec}: acknowledged partition/offsets")
        msgs = _read_partition(cons, t, p, n)
        check_eq([(m.key().decode(), m.value().decode()) for m in msgs],
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
