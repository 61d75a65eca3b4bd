"""Kafka's semantics where they decide what a real client reads (issue 35), one per process:

    python semantics_interop.py --bootstrap HOST:PORT --topic T SCENARIO

- deleted-topic-offsets: a confluent-kafka group commits offset 20 on a 30-record topic; the
  topic is deleted (confluent-kafka's admin) and created again with 25 records. kafka-python's
  admin finds no offset of the group for it, and the same group, subscribing with
  auto.offset.reset=earliest, reads all 25 records from offset 0 (not from the old offset 20).
- read-committed-by-time: confluent-kafka's transactional producer commits 3 records stamped
  TS..TS+2 (ten minutes from now, after the markers' broker time), then leaves a transaction open holding one record stamped TS+10. A read_committed
  consumer's offsets_for_times(TS+5) finds no offset (-1, past the last stable offset), a
  read_uncommitted one finds offset 4 (the commit marker is 3); after the commit
  read_committed finds offset 4 too. The admin's list_offsets by max timestamp (ListOffsets -3)
  answers the same way: -1 under read_committed while the transaction is open, 4 otherwise.
- tombstone-horizon: on a compacted topic with delete.retention.ms one hour, key "a" is written
  and deleted with timestamps a day old, then filler records make the log dirty. Once the
  cleaner has dropped "a"'s value, confluent-kafka and kafka-python still read the delete at
  offset 1 with its own timestamp: Kafka keeps a tombstone for delete.retention.ms from the
  first cleaning that sees it (KIP-534's delete horizon, stamped in the batch), not by its age.
- compression-type: on a topic with compression.type=zstd (level 19), confluent-kafka produces 50
  records uncompressed and kafka-python 50 gzip-compressed; a raw Fetch shows every stored batch
  in zstd with a valid CRC, and both clients read all 100 records back as sent: Kafka's broker
  recompresses a batch into its topic's codec.
"""

import time

from confluent_kafka import Consumer, IsolationLevel, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

import interop_common as c
from interop_common import check, check_eq

# Ten minutes ahead of the broker's clock (within Kafka 4.0's message.timestamp.after.max.ms of an
# hour): the transaction markers, stamped with the broker's time, come before TS.
TS = int(time.time() * 1000) + 600_000


def _admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def _wait(futures, what):
    for name, f in futures.items():
        try:
            f.result(timeout=20)
        except Exception as e:  # noqa: BLE001 - the admin's error is the failure
            raise c.Fail(f"{what} {name}: {e}") from None


def _fill(bootstrap, topic, n):
    prod = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        prod.produce(topic, value=f"r{i}".encode(), partition=0)
    check_eq(prod.flush(20), 0, "records still undelivered")


def _group_consumer(bootstrap, group, **kw):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    conf.update(kw)
    return Consumer(conf)


def _poll(cons, n, timeout=30.0):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        check(time.monotonic() < deadline, f"only {len(got)} of {n} records within {timeout}s")
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error():
            raise c.Fail(f"consume: {m.error()}")
        got.append(m)
    return got


def deleted_topic_offsets(bootstrap, topic):
    group = f"{topic}-group"
    admin = _admin(bootstrap)
    _wait(admin.create_topics([NewTopic(topic, 1, 1)]), "create_topics")
    _fill(bootstrap, topic, 30)
    cons = _group_consumer(bootstrap, group)
    cons.subscribe([topic])
    first = _poll(cons, 20)
    check_eq([m.offset() for m in first], list(range(20)), "offsets read before the commit")
    cons.commit(offsets=[TopicPartition(topic, 0, 20)], asynchronous=False)
    cons.close()
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    found = kp.list_group_offsets({group: None})[group]
    check_eq({tp.partition: om.offset for tp, om in found.items() if tp.topic == topic}, {0: 20},
             "kafka-python's view of the committed offset")

    _wait(admin.delete_topics([topic], operation_timeout=10), "delete_topics")
    _wait(admin.create_topics([NewTopic(topic, 1, 1)]), "create_topics again")
    _fill(bootstrap, topic, 25)
    found = kp.list_group_offsets({group: None})[group]
    left = {tp.partition: om.offset for tp, om in found.items() if tp.topic == topic and om.offset >= 0}
    check_eq(left, {}, "offsets of the group for the re-created topic")
    kp.close()
    cons = _group_consumer(bootstrap, group)
    cons.subscribe([topic])
    again = _poll(cons, 25)
    cons.close()
    check_eq([m.offset() for m in again], list(range(25)), "offsets read after re-creation")
    check_eq([m.value().decode() for m in again], [f"r{i}" for i in range(25)], "values read")
    return "offset 20 went with the deleted topic; the group read all 25 records of the new one from 0"


def _offset_for(bootstrap, topic, isolation, ts):
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "semantics-lookup",
                     "isolation.level": isolation, "enable.auto.commit": False})
    try:
        found = cons.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=15)[0]
    finally:
        cons.close()
    check(found.error is None, f"offsets_for_times error: {found.error}")
    return found.offset


def _max_timestamp_offset(admin, topic, isolation):
    """confluent-kafka's admin list_offsets with OffsetSpec.max_timestamp() (ListOffsets -3)."""
    tp = TopicPartition(topic, 0)
    futures = admin.list_offsets({tp: OffsetSpec.max_timestamp()}, isolation_level=isolation,
                                 request_timeout=15)
    return futures[tp].result(timeout=20).offset


def read_committed_by_time(bootstrap, topic):
    admin = _admin(bootstrap)
    _wait(admin.create_topics([NewTopic(topic, 1, 1)]), "create_topics")
    prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn",
                     "linger.ms": 5})
    prod.init_transactions(20)
    prod.begin_transaction()
    for i in range(3):
        prod.produce(topic, value=f"c{i}".encode(), partition=0, timestamp=TS + i)
    prod.commit_transaction(20)
    prod.begin_transaction()
    prod.produce(topic, value=b"open", partition=0, timestamp=TS + 10)
    check_eq(prod.flush(20), 0, "open transaction's record undelivered")
    # Data 0-2, commit marker 3, the open transaction's record 4.
    committed = _offset_for(bootstrap, topic, "read_committed", TS + 5)
    uncommitted = _offset_for(bootstrap, topic, "read_uncommitted", TS + 5)
    check_eq(uncommitted, 4, "read_uncommitted offsets_for_times(TS+5)")
    check_eq(committed, -1, "read_committed offsets_for_times(TS+5) with the transaction open")
    check_eq(_offset_for(bootstrap, topic, "read_committed", TS + 1), 1,
             "read_committed offsets_for_times(TS+1)")
    # The largest timestamp is the open record's (TS+10, offset 4): past the LSO under
    # read_committed, so no offset there either.
    check_eq(_max_timestamp_offset(admin, topic, IsolationLevel.READ_UNCOMMITTED), 4,
             "read_uncommitted list_offsets(max_timestamp)")
    check_eq(_max_timestamp_offset(admin, topic, IsolationLevel.READ_COMMITTED), -1,
             "read_committed list_offsets(max_timestamp) with the transaction open")
    prod.commit_transaction(20)
    check_eq(_offset_for(bootstrap, topic, "read_committed", TS + 5), 4,
             "read_committed offsets_for_times(TS+5) after the commit")
    check_eq(_max_timestamp_offset(admin, topic, IsolationLevel.READ_COMMITTED), 4,
             "read_committed list_offsets(max_timestamp) after the commit")
    return ("read_committed found no offset past the open transaction by time or max timestamp "
            "(read_uncommitted: 4), then 4 once committed")


DAY_MS = 86_400_000


def _read_all(bootstrap, topic):
    """Every record of partition 0 as (offset, key, value, timestamp), read to the end."""
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                     "enable.auto.commit": False, "enable.partition.eof": True})
    cons.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                break
            raise c.Fail(f"consume: {m.error()}")
        got.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
    cons.close()
    return got


def tombstone_horizon(bootstrap, topic):
    admin = _admin(bootstrap)
    config = {"cleanup.policy": "compact", "delete.retention.ms": "3600000",
              "min.cleanable.dirty.ratio": "0.01", "internal.segment.bytes": "1000"}
    _wait(admin.create_topics([NewTopic(topic, 1, 1, config=config)]), "create_topics")
    old = int(time.time() * 1000) - DAY_MS
    prod = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    prod.produce(topic, key=b"a", value=b"1", partition=0, timestamp=old - 1)
    prod.flush(10)
    prod.produce(topic, key=b"a", value=None, partition=0, timestamp=old)
    prod.flush(10)
    for i in range(40):
        prod.produce(topic, key=b"f", value=f"v{i}".encode(), partition=0)
        prod.flush(10)
    deadline = time.monotonic() + 20
    while True:
        records = _read_all(bootstrap, topic)
        if (records and records[0][0] != 0) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check(records and records[0][0] != 0, "the cleaner never dropped the value of \"a\" (offset 0)")
    deletes = [(o, t) for o, k, v, t in records if k == b"a" and v is None]
    check_eq(deletes, [(1, old)], "confluent-kafka: the delete of \"a\" after cleaning")
    kp = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                       consumer_timeout_ms=5000)
    kp.assign([KpTopicPartition(topic, 0)])
    kp.seek_to_beginning()
    seen = [(m.offset, m.timestamp) for m in kp if m.key == b"a" and m.value is None]
    kp.close()
    check_eq(seen, [(1, old)], "kafka-python: the delete of \"a\" after cleaning")
    return ("a day-old delete outlived the first cleaning (value of \"a\" dropped), read with its "
            "timestamp by confluent-kafka and kafka-python")


ZSTD = 4


def compression_type(bootstrap, topic):
    admin = _admin(bootstrap)
    config = {"compression.type": "zstd", "compression.zstd.level": "19"}
    _wait(admin.create_topics([NewTopic(topic, 1, 1, config=config)]), "create_topics")
    sent = [f"record {i} ".encode() * 10 for i in range(100)]
    prod = Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "linger.ms": 0})
    for value in sent[:50]:
        prod.produce(topic, value=value, partition=0)
    check_eq(prod.flush(20), 0, "confluent-kafka records undelivered")
    kp_prod = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for value in sent[50:]:
        kp_prod.send(topic, value=value, partition=0)
    kp_prod.flush(20)
    kp_prod.close()
    hw, batches = c.raw_fetch_batches(bootstrap, topic, 0)
    check_eq(hw, 100, "high watermark")
    check_eq(sum(b["count"] for b in batches), 100, "records in the stored batches")
    check_eq({(b["codec"], b["crc_ok"]) for b in batches}, {(ZSTD, True)},
             "codec and CRC of every stored batch")
    check_eq([v for _, _, v, _ in _read_all(bootstrap, topic)], sent, "confluent-kafka read back")
    kp = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                       consumer_timeout_ms=5000)
    kp.assign([KpTopicPartition(topic, 0)])
    kp.seek_to_beginning()
    got = [m.value for m in kp]
    kp.close()
    check_eq(got, sent, "kafka-python read back")
    return (f"100 records sent uncompressed and gzip stored in {len(batches)} zstd batches, read "
            "back as sent by confluent-kafka and kafka-python")


if __name__ == "__main__":
    c.run({
        "deleted-topic-offsets": deleted_topic_offsets,
        "read-committed-by-time": read_committed_by_time,
        "tombstone-horizon": tombstone_horizon,
        "compression-type": compression_type,
    }, __doc__)
