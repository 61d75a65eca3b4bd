"""Interop scenarios for kcat (Debian's kcat 1.7.1 on librdkafka 2.0.2), one per process.

Each scenario runs real kcat invocations and checks their output exactly; see interop_common.
kcat cannot create topics or add partitions, so those two steps use confluent-kafka's AdminClient
and everything else goes through kcat. Set KCAT to use another kcat binary.
"""

import concurrent.futures
import json
import os
import re
import subprocess
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

import interop_common as c
from interop_common import check, check_eq

CLIENT = "kcat"
KCAT = os.environ.get("KCAT", "kcat")
MURMUR = ["-X", "partitioner=murmur2_random"]  # Java's partitioner (librdkafka defaults to CRC32)


def kcat(bootstrap, *args, stdin=None, timeout=60, ok=True):
    cmd = [KCAT, "-b", bootstrap, "-m", "15"]
    if c.DEBUG:
        cmd += ["-d", "protocol,broker,topic,msg,fetch,metadata"]
    if "-P" in args:
        # see IDEMPOTENCE in interop_common
        cmd += ["-X", f"enable.idempotence={'true' if c.IDEMPOTENCE else 'false'}"]
    cmd += list(args)
    print("$", " ".join(cmd), flush=True)
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-2000:]
        raise c.Fail(f"kcat did not exit within {timeout}s: {' '.join(args)}; stderr tail: {tail!r}") from None
    if r.stderr:
        print(r.stderr[-4000:], flush=True)
    if ok:
        check_eq(r.returncode, 0, f"exit code of kcat {' '.join(args)} (stderr: {r.stderr[-500:]!r})")
        for bad in ("Delivery failed", "ERROR", "Failed to produce"):
            check(bad not in r.stderr, f"kcat {' '.join(args)} reported {bad!r}: {r.stderr[-1000:]!r}")
    return r


def _json_lines(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "interop-kcat-admin"})


def _wait(futures, what):
    for key, f in futures.items():
        try:
            f.result(timeout=20)
        except KafkaException as e:
            raise c.Fail(f"{what} {key}: {e.args[0]}") from None
        except concurrent.futures.TimeoutError:
            raise c.Fail(f"{what} {key}: no answer within 20 s") from None


def _create(bootstrap, topic, partitions):
    admin = _admin(bootstrap)  # keep a reference: a collected AdminClient fails its futures
    _wait(admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=10),
        "create_topics (confluent-kafka admin, for kcat)")


def _kcat_partitions(bootstrap, topic):
    md = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic).stdout)
    [t] = [t for t in md["topics"] if t["topic"] == topic]
    check("error" not in t, f"metadata error for {topic}: {t.get('error')}")
    return t["partitions"]


def _query_offsets(bootstrap, topic, partitions, ts):
    """kcat -Q (ListOffsets): {partition: offset} for timestamp ts (-1 latest, -2 earliest)."""
    args = ["-Q"]
    for p in partitions:
        args += ["-t", f"{topic}:{p}:{ts}"]
    out = kcat(bootstrap, *args).stdout
    got = {}
    for line in out.splitlines():
        m = re.fullmatch(rf"{re.escape(topic)} \[(\d+)\] offset (-?\d+)", line.strip())
        if m:
            got[int(m.group(1))] = int(m.group(2))
    check_eq(sorted(got), sorted(partitions), f"partitions answered by kcat -Q (output: {out!r})")
    return got


def _consume(bootstrap, topic, *extra, timeout=60):
    """kcat -C -e -J: must stop by itself at the end of the partition(s)."""
    r = kcat(bootstrap, "-C", "-e", "-J", "-t", topic, *extra, timeout=timeout)
    return _json_lines(r.stdout), r.stderr


def create_topic(bootstrap, topic):
    _create(bootstrap, topic, c.PARTITIONS)
    parts = c.wait_until(lambda: _kcat_partitions(bootstrap, topic), 10, "topic in kcat -L")
    check_eq(sorted(p["partition"] for p in parts), list(range(c.PARTITIONS)), "partitions listed by kcat -L")
    return f"{topic} created with {c.PARTITIONS} partitions (confluent-kafka admin), seen by kcat -L"


def metadata(bootstrap, topic):
    md = json.loads(kcat(bootstrap, "-L", "-J").stdout)
    check_eq(len(md["brokers"]), 1, "number of brokers in kcat -L -J")
    b = md["brokers"][0]
    bid = b["id"]
    check_eq(b["name"], bootstrap, "advertised broker address")
    check_eq(md["controllerid"], bid, "controller id")
    [t] = [t for t in md["topics"] if t["topic"] == topic] or [None]
    check(t is not None, f"{topic} missing from kcat -L -J: {[x['topic'] for x in md['topics']]}")
    check_eq(sorted(p["partition"] for p in t["partitions"]), list(range(c.PARTITIONS)), "partitions")
    for p in t["partitions"]:
        check("error" not in p, f"partition {p['partition']} error: {p.get('error')}")
        check_eq((p["leader"], p["replicas"], p["isrs"]), (bid, [{"id": bid}], [{"id": bid}]),
                 f"leader/replicas/isrs of partition {p['partition']}")
    text = kcat(bootstrap, "-L", "-t", topic).stdout
    for want in (" 1 brokers:", f"  broker {bid} at {bootstrap} (controller)", f'  topic "{topic}" with {c.PARTITIONS} partitions:'):
        check(want in text.splitlines(), f"kcat -L text lacks line {want!r}:\n{text}")
    for p in range(c.PARTITIONS):
        line = f"    partition {p}, leader {bid}, replicas: {bid}, isrs: {bid}"
        check(line in text.splitlines(), f"kcat -L text lacks line {line!r}:\n{text}")
    return f"kcat -L (JSON and text): 1 broker {bootstrap} (id {bid}, controller), {topic} with {c.PARTITIONS} partitions"


def produce_keyed(bootstrap, topic):
    lines = "".join(f"{k}:{c.value_for(CLIENT, k)}\n" for k in c.KEYS)
    kcat(bootstrap, "-P", "-t", topic, "-K", ":", *MURMUR, "-X", "acks=all", stdin=lines)
    ends = _query_offsets(bootstrap, topic, range(c.PARTITIONS), -1)
    check_eq(ends, c.expected_counts(), "end offsets right after producing")
    return f"kcat -P -K : -X partitioner=murmur2_random: {len(c.KEYS)} records acknowledged"


def consume_eof(bootstrap, topic):
    recs, err = _consume(bootstrap, topic, "-o", "beginning")
    summary = c.check_keyed_log([(r["partition"], r["offset"], r["key"], r["payload"]) for r in recs], CLIENT)
    eofs = {int(p): int(o) for p, o in re.findall(rf"Reached end of topic {re.escape(topic)} \[(\d+)\] at offset (\d+)", err)}
    check_eq(eofs, c.expected_counts(), "partition EOFs kcat reported (from the Fetch high watermark)")
    return f"kcat -C -e over all partitions exited by itself at EOF of all {c.PARTITIONS} partitions: " + summary


def read_back(bootstrap, topic):
    counts = c.expected_counts()
    records = []
    for p in range(c.PARTITIONS):
        recs, _ = _consume(bootstrap, topic, "-p", str(p), "-o", "0")
        check_eq({r["partition"] for r in recs}, {p}, f"partitions returned by kcat -p {p}")
        check_eq(len(recs), counts[p], f"records read from partition {p}")
        records += [(r["partition"], r["offset"], r["key"], r["payload"]) for r in recs]
    return "kcat -C -p P -o 0 -e per partition: " + c.check_keyed_log(records, CLIENT)


def end_offsets(bootstrap, topic):
    parts = range(c.PARTITIONS)
    ends = _query_offsets(bootstrap, topic, parts, -1)
    begins = _query_offsets(bootstrap, topic, parts, -2)
    check_eq(ends, c.expected_counts(), "kcat -Q latest offsets")
    check_eq(begins, {p: 0 for p in parts}, "kcat -Q earliest offsets")
    return f"kcat -Q: latest = records produced per partition (sum {sum(ends.values())}), earliest = 0"


def grow_24(bootstrap, topic):
    admin = _admin(bootstrap)
    _wait(admin.create_partitions([NewPartitions(topic, c.GROWN_PARTITIONS)], operation_timeout=10),
          "create_partitions (confluent-kafka admin, for kcat)")
    c.wait_until(lambda: len(_kcat_partitions(bootstrap, topic)) == c.GROWN_PARTITIONS, 10,
                 "24 partitions in kcat -L")
    value = f"{CLIENT}|{c.GROW_KEY}|after-grow"
    kcat(bootstrap, "-P", "-t", topic, "-K", ":", *MURMUR, stdin=f"{c.GROW_KEY}:{value}\n")
    ends = _query_offsets(bootstrap, topic, range(c.GROWN_PARTITIONS), -1)
    check_eq(ends, c.expected_grown_end_offsets(), "kcat -Q latest offsets of the 24 partitions")
    recs, _ = _consume(bootstrap, topic, "-p", str(c.GROW_KEY_PARTITION_24), "-o", "0")
    check_eq([(r["partition"], r["offset"], r["key"], r["payload"]) for r in recs],
             [(c.GROW_KEY_PARTITION_24, 0, c.GROW_KEY, value)], f"contents of partition {c.GROW_KEY_PARTITION_24}")
    return f"{topic} now has 24 partitions; kcat put {c.GROW_KEY} in partition 16 offset 0; end offsets exact"


def timestamp_lookup(bootstrap, topic):
    t = topic + "-ts"
    _create(bootstrap, t, 1)
    c.wait_until(lambda: _kcat_partitions(bootstrap, t), 10, "topic in kcat -L")
    # kcat stamps CreateTime itself: two runs with a clock reading in between.
    kcat(bootstrap, "-P", "-t", t, "-p", "0", stdin="".join(f"first-{i}\n" for i in range(10)))
    time.sleep(0.05)
    t0 = int(time.time() * 1000)
    time.sleep(0.05)
    kcat(bootstrap, "-P", "-t", t, "-p", "0", stdin="".join(f"second-{i}\n" for i in range(10)))
    recs, _ = _consume(bootstrap, t, "-p", "0", "-o", "beginning")
    check_eq([(r["offset"], r["payload"]) for r in recs],
             [(i, f"first-{i}") for i in range(10)] + [(10 + i, f"second-{i}") for i in range(10)],
             "records of the timestamp topic")
    check(all(r["tstype"] == "create" for r in recs), "every record has a CreateTime timestamp")
    check(all(r["ts"] < t0 for r in recs[:10]) and all(r["ts"] >= t0 for r in recs[10:]),
          f"timestamps straddle {t0}: {[r['ts'] for r in recs]}")
    check_eq(_query_offsets(bootstrap, t, [0], t0), {0: 10}, f"kcat -Q {t}:0:{t0}")
    check_eq(_query_offsets(bootstrap, t, [0], recs[0]["ts"]), {0: 0}, "kcat -Q at the first record's timestamp")
    check_eq(_query_offsets(bootstrap, t, [0], recs[-1]["ts"] + 1), {0: -1},
             "kcat -Q past the last timestamp (Kafka answers offset -1)")
    later, _ = _consume(bootstrap, t, "-p", "0", "-o", f"s@{t0}")
    check_eq([(r["offset"], r["payload"]) for r in later], [(10 + i, f"second-{i}") for i in range(10)],
             f"kcat -C -o s@{t0}")
    return f"kcat -Q {t}:0:<ms> gave 10, 0 and -1 exactly; -o s@<ms> started at offset 10"


def compression(bootstrap, topic):
    t = topic + "-z"
    _create(bootstrap, t, len(c.CODECS))
    c.wait_until(lambda: _kcat_partitions(bootstrap, t), 10, "topic in kcat -L")
    n = c.COMPRESSED_RECORDS
    notes = []
    for p, codec in enumerate(c.CODECS):
        lines = "".join(f"k{i}:{c.compressed_value(CLIENT, codec, i)}\n" for i in range(n))
        kcat(bootstrap, "-P", "-t", t, "-p", str(p), "-K", ":", "-z", codec, stdin=lines)
        recs, _ = _consume(bootstrap, t, "-p", str(p), "-o", "0")
        check_eq([(r["offset"], r["key"], r["payload"]) for r in recs],
                 [(i, f"k{i}", c.compressed_value(CLIENT, codec, i)) for i in range(n)],
                 f"{codec}: offsets, keys and values read back")
        notes.append(c.check_codec_batches(bootstrap, t, p, codec, n))
    return f"kcat -z: {n} records each read back exactly: " + "; ".join(notes)


if __name__ == "__main__":
    c.run({
        "create-topic": create_topic,
        "metadata": metadata,
        "produce-keyed": produce_keyed,
        "consume-eof": consume_eof,
        "read-back": read_back,
        "end-offsets": end_offsets,
        "grow-24": grow_24,
        "timestamp-lookup": timestamp_lookup,
        "compression": compression,
    }, __doc__)
