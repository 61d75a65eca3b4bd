"""Interop scenarios for transactions, topic configs and DeleteRecords, one per process.

Transactional producers of confluent-kafka (librdkafka) and kafkajs (init_transactions,
send_offsets_to_transaction, commit and abort) with read_committed consumers of both clients
seeing only the committed records; kafka-python's admin altering and describing configs;
confluent-kafka's delete_records; a compacted topic read after cleaning holding one record per
key (the broker runs its cleaner every 500 ms for these scenarios, see run.sh).
"""

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import interop_common as c
from interop_common import check, check_eq
from kafkajs_interop import kafkajs

GROUP = "interop-txn-copier"


def _admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap, topic, partitions=1, config=None):
    admin = _admin(bootstrap)
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    futures[topic].result(timeout=20)


def _txn_producer(bootstrap, txn_id, **kw):
    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id,
            "partitioner": "murmur2_random", "linger.ms": 5}
    conf.update(kw)
    return Producer(conf)


def _consumer(bootstrap, isolation, group="interop-txn-reader"):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "enable.partition.eof": True,
                     "auto.offset.reset": "earliest", "isolation.level": isolation})


def _read(bootstrap, topic, isolation, timeout=20.0):
    """Every record of partition 0 up to the end a consumer at `isolation` sees:
    [(offset, value)]."""
    cons = _consumer(bootstrap, isolation)
    cons.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    return out
                raise c.Fail(f"consume: {m.error()}")
            out.append((m.offset(), m.value().decode()))
        raise c.Fail(f"no end of partition within {timeout}s; read {out}")
    finally:
        cons.close()


def confluent_transactions(bootstrap, topic):
    _create(bootstrap, topic)
    prod = _txn_producer(bootstrap, "interop-confluent-txn")
    prod.init_transactions(20)
    group_meta = _consumer(bootstrap, "read_committed", GROUP).consumer_group_metadata()
    prod.begin_transaction()
    for i in range(5):
        prod.produce(topic, key=f"k{i}", value=f"committed-{i}", partition=0)
    prod.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], group_meta, 20)
    prod.commit_transaction(20)
    prod.begin_transaction()
    for i in range(3):
        prod.produce(topic, key=f"k{i}", value=f"aborted-{i}", partition=0)
    prod.flush(20)
    prod.abort_transaction(20)
    # Data 0-4, commit marker 5, aborted data 6-8, abort marker 9.
    committed = _read(bootstrap, topic, "read_committed")
    check_eq(committed, [(i, f"committed-{i}") for i in range(5)], "read_committed records")
    everything = _read(bootstrap, topic, "read_uncommitted")
    check_eq([o for o, _ in everything], [0, 1, 2, 3, 4, 6, 7, 8], "read_uncommitted offsets")
    cons = _consumer(bootstrap, "read_committed", GROUP)
    offset = cons.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    cons.close()
    check_eq(offset, 5, f"offset committed for {GROUP} with the transaction")
    lo, hi = _consumer(bootstrap, "read_committed").get_watermark_offsets(TopicPartition(topic, 0), 10)
    check_eq((lo, hi), (0, 10), "watermarks (markers take offsets 5 and 9)")
    return "5 committed records seen by read_committed, 3 aborted skipped, offset 5 committed"


def confluent_invalid_timeout(bootstrap, topic):
    prod = _txn_producer(bootstrap, "interop-confluent-too-long",
                         **{"transaction.timeout.ms": 2147483647})
    try:
        prod.init_transactions(20)
    except KafkaException as e:
        err = e.args[0]
        check_eq(err.name(), "INVALID_TRANSACTION_TIMEOUT", "init_transactions error")
        return "transaction.timeout.ms=2147483647 refused: INVALID_TRANSACTION_TIMEOUT"
    raise c.Fail("init_transactions accepted a timeout above transaction.max.timeout.ms")


def kafkajs_transactions(bootstrap, topic):
    _create(bootstrap, topic)
    spec = [
        {"messages": [{"key": f"k{i}", "value": f"committed-{i}", "partition": 0} for i in range(4)],
         "offsets": {"group": GROUP + "-js", "partition": 0, "offset": 4}, "commit": True},
        {"messages": [{"key": f"k{i}", "value": f"aborted-{i}", "partition": 0} for i in range(2)],
         "commit": False},
    ]
    kafkajs("txn-produce", bootstrap, topic, "interop-kafkajs-txn", stdin=spec)
    # Data 0-3, commit marker 4, aborted 5-6, abort marker 7.
    committed = _read(bootstrap, topic, "read_committed")
    check_eq(committed, [(i, f"committed-{i}") for i in range(4)], "confluent read_committed records")
    js = kafkajs("consume", bootstrap, topic, "interop-txn-js-reader", 4)["records"]
    check_eq([(r["o"], r["v"]) for r in js], [(i, f"committed-{i}") for i in range(4)],
             "kafkajs read_committed records")
    cons = _consumer(bootstrap, "read_committed", GROUP + "-js")
    offset = cons.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    cons.close()
    check_eq(offset, 4, "offset committed by kafkajs's sendOffsets")
    return "kafkajs: 4 committed records seen by confluent-kafka and kafkajs read_committed consumers"


def kafkajs_reads_confluent(bootstrap, topic):
    """kafkajs's read_committed group consumer on the topic confluent_transactions wrote."""
    js = kafkajs("consume", bootstrap, topic, "interop-txn-js-reader-2", 5)["records"]
    check_eq([(r["o"], r["v"]) for r in js], [(i, f"committed-{i}") for i in range(5)],
             "kafkajs read_committed of confluent-kafka's transactions")
    return "kafkajs read_committed: the 5 committed records, none of the 3 aborted"


def kafka_python_configs(bootstrap, topic):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-configs")
    admin.create_topics([KNewTopic(topic, 1, 1, topic_configs={"retention.ms": "3600000"})])

    def alter(configs, incremental):
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)
        return admin.alter_configs([resource], raise_on_unknown=False,
                                   incremental=incremental)["topic"][topic]

    def described(config_filter="all"):
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        return admin.describe_configs([resource], config_filter=config_filter)["topic"][topic]

    # AlterConfigs (kafka-python sends the other modified configs along), then
    # IncrementalAlterConfigs.
    check_eq(alter({"retention.ms": "1000"}, False), "OK", "AlterConfigs result")
    check_eq(alter({"cleanup.policy": "compact"}, True), "OK", "IncrementalAlterConfigs result")
    everything = described()
    check_eq((everything["retention.ms"]["value"], everything["retention.ms"]["config_source"]),
             ("1000", "DYNAMIC_TOPIC_CONFIG"), "retention.ms")
    check_eq(everything["cleanup.policy"]["value"], "compact", "cleanup.policy")
    check_eq((everything["segment.ms"]["value"], everything["segment.ms"]["config_source"]),
             ("604800000", "DEFAULT_CONFIG"), "segment.ms (a default)")
    check_eq(sorted(described("modified")), ["cleanup.policy", "retention.ms"], "modified configs")
    refused = alter({"bogus.key": "1"}, True)
    check(refused.startswith("[Error 40] "), f"bogus.key refused: {refused}")
    check_eq(described("modified")["retention.ms"]["value"], "1000", "retention.ms after the refusal")
    admin.close()
    return ("AlterConfigs and IncrementalAlterConfigs applied, described with their sources; "
            f"bogus.key refused: {refused}")


def confluent_delete_records(bootstrap, topic):
    _create(bootstrap, topic)
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):
        prod.produce(topic, key=f"k{i}", value=f"v{i}", partition=0)
        prod.flush(10)
    admin = _admin(bootstrap)
    futures = admin.delete_records([TopicPartition(topic, 0, 4)])
    result = list(futures.values())[0].result(timeout=20)
    check_eq(result.low_watermark, 4, "low watermark after delete_records")
    lo, hi = _consumer(bootstrap, "read_uncommitted").get_watermark_offsets(TopicPartition(topic, 0), 10)
    check_eq((lo, hi), (4, 10), "watermarks")
    check_eq([o for o, _ in _read(bootstrap, topic, "read_uncommitted")], list(range(4, 10)),
             "offsets read from the earliest")
    return "delete_records to 4: low watermark 4, records 4-9 remain"


def compaction(bootstrap, topic):
    _create(bootstrap, topic, config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(40):
        prod.produce(topic, key=f"k{i % 13}", value=f"v{i}", partition=0)
        prod.flush(10)
    reports = []
    prod.produce(topic, value="no key", partition=0, on_delivery=lambda err, _: reports.append(err))
    prod.flush(10)
    check_eq([e.name() if e else None for e in reports], ["INVALID_RECORD"], "a keyless record")
    deadline = time.monotonic() + 20
    while True:
        records = _read(bootstrap, topic, "read_uncommitted")
        if len(records) == 13 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check_eq(records, [(i, f"v{i}") for i in range(27, 40)], "records after cleaning")
    return ("40 records of 13 keys cleaned to 13: the last of each key (offsets 27-39); "
            "a keyless record refused with INVALID_RECORD")


if __name__ == "__main__":
    c.run({
        "confluent-transactions": confluent_transactions,
        "confluent-invalid-timeout": confluent_invalid_timeout,
        "kafkajs-transactions": kafkajs_transactions,
        "kafkajs-reads-confluent": kafkajs_reads_confluent,
        "kafka-python-configs": kafka_python_configs,
        "confluent-delete-records": confluent_delete_records,
        "compaction": compaction,
    }, __doc__)
