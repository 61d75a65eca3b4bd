"""Group offsets moved by one tool and read by another (issue 19), one scenario per process:

    python offsets_interop.py --bootstrap HOST:PORT --topic T SCENARIO

The topic has 3 partitions holding 4, 6 and 8 records (produced by kafka-python to explicit
partitions), stamped 1970-01-01T00:00:0N (partition p, record i: (i + 1) * 1000 ms), so every
target has one right answer.

- cli-reset-read-by-kafka-python: our `client groups reset-offsets` (--to-latest, then
  --shift-by -3, then --to-offset 1 on partition 1, then --to-datetime on partition 2) and
  `client groups delete-offsets` on partition 0; after each, kafka-python 3.x's
  KafkaAdminClient.list_group_offsets and kafka-python 2.0.2's list_consumer_group_offsets
  (kp2_admin.py) must read exactly the offsets planned. A --dry-run must change nothing.
- kafka-python-reset-seen-by-cli: kafka-python's KafkaAdminClient.reset_group_offsets (EARLIEST,
  an explicit offset, a timestamp) and then delete_group_offsets; our `client groups describe
  --format json` must show exactly those committed offsets and lags, and `groups wait` must agree.
"""

import json
import os
import subprocess

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic, OffsetSpec, OffsetTimestamp

import interop_common as c
from interop_common import check_eq

HERE = os.path.dirname(os.path.abspath(__file__))
KP2_PYTHON = os.environ.get("INTEROP_KP2_PYTHON", os.path.join(HERE, ".venv-kp2", "bin", "python"))
COUNTS = {0: 4, 1: 6, 2: 8}


def client(bootstrap, *args, expect=0):
    cmd = [c.client_bin(), "--bootstrap", bootstrap, *args]
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, timeout=60)
    out, err = r.stdout.decode(), r.stderr.decode()
    print(out + err, flush=True)
    check_eq(r.returncode, expect, f"exit status of client {' '.join(args)} (stderr: {err[-300:]!r})")
    return out, err


def setup(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, len(COUNTS), 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=c.IDEMPOTENCE)
    for p, n in COUNTS.items():
        for i in range(n):
            producer.send(topic, value=f"p{p}-{i}".encode(), partition=p, timestamp_ms=(i + 1) * 1000)
    producer.flush()
    producer.close()
    return admin


def kafka_python_offsets(admin, group, topic):
    found = admin.list_group_offsets({group: None})[group]
    return {tp.partition: om.offset for tp, om in found.items() if tp.topic == topic and om.offset >= 0}


def kp2_offsets(bootstrap, group, topic):
    if not os.access(KP2_PYTHON, os.X_OK):
        return None
    r = subprocess.run([KP2_PYTHON, os.path.join(HERE, "kp2_admin.py"), "--bootstrap", bootstrap,
                        "--group", group], capture_output=True, timeout=60)
    check_eq(r.returncode, 0, f"kp2_admin.py exit status ({r.stdout.decode()[-500:]!r})")
    offsets = json.loads(r.stdout)["offsets"]
    return {int(k.rsplit(":", 1)[1]): v for k, v in offsets.items()
            if k.rsplit(":", 1)[0] == topic and v >= 0}


def cli_reset_read_by_kafka_python(bootstrap, topic):
    admin = setup(bootstrap, topic)
    group = topic + "-cli"
    readers = 0

    def agree(want, what):
        nonlocal readers
        check_eq(kafka_python_offsets(admin, group, topic), want, f"kafka-python 3.x after {what}")
        kp2 = kp2_offsets(bootstrap, group, topic)
        if kp2 is not None:
            check_eq(kp2, want, f"kafka-python 2.0.2 after {what}")
            readers = 2
        else:
            readers = 1

    reset = ["groups", "reset-offsets", group]
    out, _ = client(bootstrap, *reset, "--topic", topic, "--to-latest", "--execute")
    check_eq(out.count("\n" + group), 3, "rows of the plan")
    agree({0: 4, 1: 6, 2: 8}, "--to-latest")
    client(bootstrap, *reset, "--all-topics", "--shift-by", "-3", "--execute")
    agree({0: 1, 1: 3, 2: 5}, "--shift-by -3")
    client(bootstrap, *reset, "--topic", f"{topic}:1", "--to-offset", "1", "--execute")
    # partition 2's first record stamped at or after 00:00:06.5 is its 7th (offset 6)
    client(bootstrap, *reset, "--topic", f"{topic}:2", "--to-datetime", "1970-01-01T00:00:06.500",
           "--execute")
    client(bootstrap, *reset, "--all-topics", "--to-earliest", "--dry-run")
    agree({0: 1, 1: 1, 2: 6}, "--to-offset, --to-datetime and a --dry-run")
    client(bootstrap, "groups", "delete-offsets", group, "--topic", f"{topic}:0")
    agree({1: 1, 2: 6}, "delete-offsets of partition 0")
    admin.close()
    return f"4 resets and a delete by our CLI read back by {readers} kafka-python admin client(s)"


def cli_view(bootstrap, group, topic):
    out, _ = client(bootstrap, "groups", "describe", group, "--format", "json")
    [g] = json.loads(out)["groups"]
    return {p["partition"]: (p["current_offset"], p["lag"]) for p in g["partitions"] if p["topic"] == topic}


def kafka_python_reset_seen_by_cli(bootstrap, topic):
    admin = setup(bootstrap, topic)
    group = topic + "-kp"
    tp = [TopicPartition(topic, p) for p in range(3)]
    answers = admin.reset_group_offsets(group, {
        tp[0]: OffsetSpec.EARLIEST,
        tp[1]: 5,
        # partition 2's first record stamped at or after 3 s is its 3rd (offset 2)
        tp[2]: OffsetTimestamp(3000),
    })
    print("reset_group_offsets:", answers, flush=True)
    check_eq(cli_view(bootstrap, group, topic), {0: (0, 4), 1: (5, 1), 2: (2, 6)},
             "our describe after kafka-python's reset (offset, lag)")
    client(bootstrap, "groups", "wait", group, "--max-lag", "6", "--timeout", "5")
    client(bootstrap, "groups", "wait", group, "--max-lag", "5", "--timeout", "1", expect=1)
    deleted = admin.delete_group_offsets(group, [tp[1]])
    print("delete_group_offsets:", deleted, flush=True)
    check_eq(cli_view(bootstrap, group, topic), {0: (0, 4), 2: (2, 6)},
             "our describe after kafka-python's delete of partition 1")
    admin.close()
    return "kafka-python's reset (earliest, offset, timestamp) and delete seen by our describe and wait"


if __name__ == "__main__":
    c.run({
        "cli-reset-read-by-kafka-python": cli_reset_read_by_kafka_python,
        "kafka-python-reset-seen-by-cli": kafka_python_reset_seen_by_cli,
    }, __doc__)
