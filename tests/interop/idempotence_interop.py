"""Interop proof for idempotent producers (issue 6): real clients produce through a broker that
drops a share of produce acknowledgements after appending, and the log holds each record exactly
once, in order.

    python idempotence_interop.py [--broker-bin PATH | --bootstrap HOST:PORT] [--records N]

Without --bootstrap the script starts the broker binary itself (default: target/release/broker,
else target/debug/broker) with

    --listen 127.0.0.1:0 --fault drop-ack:probability=0.2,seed=5

reads the address from its first stdout line, counts the connections it closed after an append
(its "fault injection: produce acknowledgement dropped" log lines, which must be > 0), and stops
it with SIGTERM by PID at the end. With --bootstrap it uses a broker already started with such a
fault and cannot count the drops.

Clients (each on its own topic of 3 partitions):
- confluent-kafka (bundled librdkafka) with enable.idempotence=true, Java's murmur2 partitioner;
- kafka-python 3.x with its defaults, which are idempotent since 3.0.

Each sends N keyed records (key-0..key-49 round robin, values unique), all in flight together,
and every delivery must succeed. Then each topic is read back (kafka-python consumer, assign mode)
and checked exactly: every record once, in its key's murmur2 partition, and per partition in
send order with offsets 0..n-1. Prints one line per client and exits non-zero on any failure.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

import interop_common as c
from interop_common import Fail, check, check_eq
from kafka_murmur2 import partition_for_key

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FAULT = "drop-ack:probability=0.2,seed=5"
DROP_LINE = re.compile(r"fault injection: produce acknowledgement dropped")
PARTITIONS = 3
KEYS = 50


def default_broker_bin():
    for profile in ("release", "debug"):
        path = os.path.join(ROOT, "target", profile, "broker")
        if os.access(path, os.X_OK):
            return path
    return None


class Broker:
    """The broker binary with the fault, on a free port; SIGTERM to its own PID on stop."""

    def __init__(self, binary):
        self.log = tempfile.NamedTemporaryFile(prefix="idempotence-broker-", suffix=".log",
                                               delete=False)
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        self.proc = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--fault", FAULT],
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, text=True)
        line = self.proc.stdout.readline()
        check(line.startswith("broker listening on"), f"broker did not start: {line!r}")
        self.addr = line.split()[-1]

    def drops(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if DROP_LINE.search(line))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)


def create_topic(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="idempotence-interop-admin",
                             request_timeout_ms=15000)
    res = admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}})
    check_eq([(t["name"], t["error_code"]) for t in res["topics"]], [(topic, 0)], "CreateTopics")
    admin.wait_for_topics([topic], timeout_ms=10000)
    admin.close()


def records(client, n):
    return [(f"key-{i % KEYS}", f"{client}|{i:05d}") for i in range(n)]


def produce_confluent(bootstrap, topic, sent):
    from confluent_kafka import Producer
    conf = {
        "bootstrap.servers": bootstrap,
        "client.id": "idempotence-interop-confluent",
        "enable.idempotence": True,
        "partitioner": "murmur2_random",  # Java's partitioner (librdkafka defaults to CRC32)
        # Small batches, so that a thousand records make hundreds of produce requests and the
        # fault hits many of them.
        "linger.ms": 0,
        "batch.num.messages": 4,
        "retry.backoff.ms": 20,
        "message.timeout.ms": 120000,
        # Every dropped acknowledgement closes a connection: expected here, not worth a log line.
        "log.connection.close": False,
    }
    if c.DEBUG:
        conf["debug"] = "eos,protocol,broker,msg"
    producer = Producer(conf)
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(f"{msg.key()!r}: {err}")

    for key, value in sent:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=report)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(120)
    check_eq(left, 0, "confluent-kafka messages undelivered after flush")
    check(not errors, f"confluent-kafka delivery errors: {errors[:5]}")


def produce_kafka_python(bootstrap, topic, sent):
    # No enable_idempotence argument: kafka-python 3.x is idempotent by default, which is what
    # this checks. acks=all and at most 5 requests in flight come with it.
    # Small batches, as for confluent-kafka: many requests, many of them hit by the fault.
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="idempotence-interop-kp",
                             linger_ms=0, batch_size=128, retry_backoff_ms=20,
                             request_timeout_ms=10000)
    check(producer.config.get("enable_idempotence"),
          "kafka-python's producer is not idempotent by default (need kafka-python >= 3.0)")
    futures = [producer.send(topic, key=key.encode(), value=value.encode())
               for key, value in sent]
    producer.flush(timeout=120)
    failed = [f.exception for f in futures if f.failed()]
    check(not failed, f"kafka-python delivery errors: {failed[:5]}")
    check(all(f.succeeded() for f in futures), "kafka-python: some deliveries never completed")
    producer.close()


def read_back(bootstrap, topic):
    """{partition: [(offset, key, value)]} for the whole topic."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="idempotence-interop-reader",
                             group_id=None, enable_auto_commit=False, auto_offset_reset="none",
                             request_timeout_ms=15000)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    ends = consumer.end_offsets(tps)
    got = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        check(time.monotonic() < deadline, "timed out reading the topic back")
        for tp, recs in consumer.poll(timeout_ms=500).items():
            got[tp.partition].extend(
                (r.offset, r.key.decode(), r.value.decode()) for r in recs if r.offset < ends[tp])
    consumer.close()
    return got


def check_exactly_once_in_order(got, sent):
    """Every record once, in its key's murmur2 partition, in send order, offsets 0..n-1."""
    expected = {p: [] for p in range(PARTITIONS)}
    for key, value in sent:
        expected[partition_for_key(key, PARTITIONS)].append((key, value))
    for p in range(PARTITIONS):
        offsets = [o for o, _, _ in got[p]]
        check_eq(offsets, list(range(len(offsets))), f"offsets of partition {p}")
        stored = [(k, v) for _, k, v in got[p]]
        if stored != expected[p]:
            seen = {}
            for o, _, v in got[p]:
                seen.setdefault(v, []).append(o)
            dups = {v: o for v, o in seen.items() if len(o) > 1}
            missing = sorted({v for _, v in expected[p]} - set(seen))
            raise Fail(f"partition {p}: {len(stored)} records for {len(expected[p])} sent; "
                       f"duplicates {list(dups.items())[:5]}, missing {missing[:5]}, "
                       "or out of order")
    return sum(len(v) for v in expected.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker-bin", default=None, help="broker binary to start with the fault")
    ap.add_argument("--bootstrap", default=None,
                    help=f"a broker already running with --fault {FAULT} (nothing is started)")
    ap.add_argument("--records", type=int, default=1000, help="records per client")
    args = ap.parse_args()

    broker = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        binary = args.broker_bin or default_broker_bin()
        if not binary:
            print("FAIL setup: no broker binary; build one (cargo build -p broker) or pass "
                  "--broker-bin or --bootstrap")
            return 1
        broker = Broker(binary)
        bootstrap = broker.addr
    run_id = f"{os.getpid():x}{int(time.time()) & 0xffffff:x}"
    failures = 0
    try:
        for client, produce in (("confluent-kafka", produce_confluent),
                                ("kafka-python", produce_kafka_python)):
            t0 = time.monotonic()
            topic = f"idempotence-{client}-{run_id}"
            try:
                create_topic(bootstrap, topic)
                sent = records(client, args.records)
                drops_before = broker.drops() if broker else None
                produce(bootstrap, topic, sent)
                n = check_exactly_once_in_order(read_back(bootstrap, topic), sent)
                dropped = ""
                if broker:
                    count = broker.drops() - drops_before
                    check(count > 0, f"the broker dropped no acknowledgement for {client}")
                    dropped = f", {count} acknowledgements dropped by the broker"
                print(f"ok {client}: {n} records exactly once and in order per partition"
                      f"{dropped} ({time.monotonic() - t0:.1f}s)")
            except Fail as e:
                failures += 1
                print(f"FAIL {client}: {e}")
            except Exception as e:  # noqa: BLE001 - a client error is a failure too
                failures += 1
                print(f"FAIL {client}: unexpected {type(e).__name__}: {e}")
    finally:
        if broker:
            broker.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
