"""Our `client` CLI both ways (issue 3), one scenario per process; see interop_common.

    python cli_interop.py --bootstrap HOST:PORT --topic NAME SCENARIO

The binary is INTEROP_CLIENT_BIN (run.sh sets it), else target/release/client, else
target/debug/client. What `client produce` writes (keyed with -K, and with each --compression
codec) is read back by kcat and by kafka-python; what kcat (-X partitioner=murmur2_random) and
kafka-python produce, plain and with each codec, is read back by `client consume --exit --format
'%p %o %k %s\\n'`. Every direction checks the same partitions (Java's murmur2), the same offsets
(0..n-1 per partition, in send order) and the same bytes: values carry a colon after the key
delimiter and multi-byte UTF-8, and one partition carries binary values (every byte but 0x0a).
"""

import re
import subprocess

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

import interop_common as c
from interop_common import check, check_eq

# value_for(LABEL, key) is "LABEL|key|payload": a colon after -K's delimiter, and UTF-8
CLI_LABEL = "client:grüße"
KCAT_LABEL = "kcat→client"
KP_LABEL = "kafka-python→client"
MURMUR = ["-X", "partitioner=murmur2_random"]
BINARY_RECORDS = 255
FORMAT = "%p %o %k %s\\n"


def binary_value(i: int) -> bytes:
    """64 bytes, every value 0..255 but the newline over the set; a line of its own for the CLI."""
    return bytes(b if b != 0x0A else 0x0B for b in ((i + j * 7) % 256 for j in range(64)))


def client(bootstrap, *args, stdin=None, timeout=120):
    cmd = [c.client_bin(), "--bootstrap", bootstrap, *args]
    print("$", " ".join(cmd), flush=True)
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise c.Fail(f"client {' '.join(args)} did not exit within {timeout}s") from None
    err = r.stderr.decode("utf-8", "replace")
    if err:
        print(err[-3000:], flush=True)
    check_eq(r.returncode, 0, f"exit status of client {' '.join(args)} (stderr: {err[-500:]!r})")
    return r.stdout, err


def kcat(bootstrap, *args, stdin=None, timeout=60):
    cmd = ["kcat", "-b", bootstrap, "-m", "15", *args]
    if "-P" in args:
        cmd += ["-X", f"enable.idempotence={'true' if c.IDEMPOTENCE else 'false'}"]
    if c.DEBUG:
        cmd += ["-d", "protocol,broker,topic,msg"]
    print("$", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
    err = r.stderr.decode("utf-8", "replace")
    check_eq(r.returncode, 0, f"exit status of kcat {' '.join(args)} (stderr: {err[-500:]!r})")
    for bad in ("Delivery failed", "ERROR", "Failed to produce"):
        check(bad not in err, f"kcat {' '.join(args)} reported {bad!r}: {err[-1000:]!r}")
    return r.stdout


def create(bootstrap, topic, partitions):
    out, _ = client(bootstrap, "topics", "create", topic, "--partitions", str(partitions))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-cli-check")
    admin.wait_for_topics([topic], timeout_ms=10000)
    [t] = admin.describe_topics([topic])
    admin.close()
    check_eq(len(t["partitions"]), partitions, f"partitions of {topic} (kafka-python describe_topics)")


def end_offsets(bootstrap, topic, partitions):
    cons = KafkaConsumer(bootstrap_servers=bootstrap, client_id="interop-cli-check", group_id=None)
    ends = {tp.partition: o for tp, o in cons.end_offsets([TopicPartition(topic, p) for p in range(partitions)]).items()}
    cons.close()
    return ends


def kafka_python_read(bootstrap, topic, counts):
    """Raw bytes: [(partition, offset, key, value)] of exactly counts[p] records per partition."""
    cons = KafkaConsumer(bootstrap_servers=bootstrap, client_id="interop-cli-check", group_id=None,
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
        check_eq(len(got), n, f"records kafka-python read from partition {p}")
        out += [(r.partition, r.offset, r.key, r.value) for r in got]
    cons.close()
    return out


def kcat_read(bootstrap, topic, partition=None):
    """kcat -C -e with a raw format (bytes as stored): [(partition, offset, key, value)]."""
    args = ["-C", "-e", "-t", topic, "-o", "beginning", "-f", "%p %o %k %s\\n"]
    if partition is not None:
        args += ["-p", str(partition)]
    return parse_lines(kcat(bootstrap, *args), "kcat")


def parse_lines(out: bytes, who):
    recs = []
    for line in out.split(b"\n")[:-1]:
        p, o, k, v = line.split(b" ", 3)
        recs.append((int(p), int(o), k, v))
    check(out == b"" or out.endswith(b"\n"), f"{who}'s output does not end with a newline")
    return recs


def client_read(bootstrap, topic, partition=None, want=None):
    args = ["consume", topic, "--exit", "--format", FORMAT]
    if partition is not None:
        args += ["--partition", str(partition)]
    out, err = client(bootstrap, *args)
    recs = parse_lines(out, "client consume")
    if want is not None:
        check(f"consumed {want} records from {topic}" in err, f"client consume summary on stderr: {err.strip()!r}")
    return recs


def as_text(records):
    return [(p, o, k.decode("utf-8"), v.decode("utf-8")) for p, o, k, v in records]


def check_keyed(records, label):
    summary = c.check_keyed_log(as_text(records), label)
    c.check_send_order(as_text(records), c.KEYS)
    return summary + ", in send order"


def keyed_lines(label) -> bytes:
    return "".join(f"{k}:{c.value_for(label, k)}\n" for k in c.KEYS).encode("utf-8")


# ---- our CLI writes ---------------------------------------------------------------------------

def create_topic(bootstrap, topic):
    create(bootstrap, topic, c.PARTITIONS)
    return f"client topics create {topic} --partitions {c.PARTITIONS}: 12 partitions in kafka-python's describe_topics"


def produce_keyed(bootstrap, topic):
    _, err = client(bootstrap, "produce", topic, "-K", ":", stdin=keyed_lines(CLI_LABEL))
    counts = c.expected_counts()
    m = re.search(rf"produced (\d+) records to {re.escape(topic)} in [\d.]+ s \((.*)\)", err)
    check(m, f"client produce summary on stderr: {err.strip()!r}")
    check_eq(int(m.group(1)), len(c.KEYS), "records produced (summary)")
    per = {int(p): int(n) for p, n in re.findall(r"partition (\d+): (\d+)", m.group(2))}
    check_eq(per, {p: n for p, n in counts.items() if n}, "per-partition counts in the summary")
    check_eq(end_offsets(bootstrap, topic, c.PARTITIONS), counts, "end offsets (kafka-python) after client produce")
    return f"client produce -K : : {len(c.KEYS)} records, summary and end offsets = murmur2 counts per partition"


def read_by_kcat(bootstrap, topic):
    return "kcat -C -e: " + check_keyed(kcat_read(bootstrap, topic), CLI_LABEL)


def read_by_kafka_python(bootstrap, topic):
    return "kafka-python: " + check_keyed(kafka_python_read(bootstrap, topic, c.expected_counts()), CLI_LABEL)


def compression(bootstrap, topic):
    t = topic + "-z"
    create(bootstrap, t, len(c.CODECS) + 1)
    n = c.COMPRESSED_RECORDS
    notes = []
    for p, codec in enumerate(c.CODECS):
        values = [c.compressed_value(CLI_LABEL, codec, i).encode() for i in range(n)]
        client(bootstrap, "produce", t, "--partition", str(p), "--compression", codec, "-K", ":",
               stdin=b"".join(b"k%d:%s\n" % (i, v) for i, v in enumerate(values)))
        want = [(p, i, f"k{i}".encode(), v) for i, v in enumerate(values)]
        check_eq(kcat_read(bootstrap, t, p), want, f"{codec}: records kcat read")
        check_eq(kafka_python_read(bootstrap, t, {p: n}), want, f"{codec}: records kafka-python read")
        # the CLI's producer is not idempotent (issue 6 made the library's optional, off by default)
        notes.append(c.check_codec_batches(bootstrap, t, p, codec, n, idempotent=False))
    # binary values, uncompressed: every byte but the newline goes through unchanged
    p = len(c.CODECS)
    values = [binary_value(i) for i in range(BINARY_RECORDS)]
    client(bootstrap, "produce", t, "--partition", str(p), "-K", ":",
           stdin=b"".join(b"b%d:%s\n" % (i, v) for i, v in enumerate(values)))
    want = [(p, i, f"b{i}".encode(), v) for i, v in enumerate(values)]
    check_eq(kafka_python_read(bootstrap, t, {p: BINARY_RECORDS}), want, "binary values kafka-python read")
    check_eq(kcat_read(bootstrap, t, p), want, "binary values kcat read")
    notes.append(c.check_codec_batches(bootstrap, t, p, "none", BINARY_RECORDS, idempotent=False))
    return (f"client produce --compression: {n} records per codec and {BINARY_RECORDS} binary ones read "
            f"byte-exact by kcat and kafka-python: " + "; ".join(notes))


# ---- our CLI reads ----------------------------------------------------------------------------

def kcat_to_client(bootstrap, topic):
    t = topic + "-from-kcat"
    create(bootstrap, t, c.PARTITIONS)
    kcat(bootstrap, "-P", "-t", t, "-K", ":", *MURMUR, "-X", "acks=all", stdin=keyed_lines(KCAT_LABEL))
    return "kcat -P -K : (murmur2_random), client consume --exit: " + check_keyed(
        client_read(bootstrap, t, want=len(c.KEYS)), KCAT_LABEL)


def kcat_codecs_to_client(bootstrap, topic):
    t = topic + "-from-kcat-z"
    create(bootstrap, t, len(c.CODECS))
    n = c.COMPRESSED_RECORDS
    for p, codec in enumerate(c.CODECS):
        values = [c.compressed_value(KCAT_LABEL, codec, i).encode() for i in range(n)]
        kcat(bootstrap, "-P", "-t", t, "-p", str(p), "-K", ":", "-z", codec,
             stdin=b"".join(b"k%d:%s\n" % (i, v) for i, v in enumerate(values)))
        c.check_codec_batches(bootstrap, t, p, codec, n)
        check_eq(client_read(bootstrap, t, p, want=n), [(p, i, f"k{i}".encode(), v) for i, v in enumerate(values)],
                 f"{codec}: records client consume read")
    return f"kcat -z {'/'.join(c.CODECS)} (batches checked raw), {n} records each read byte-exact by client consume"


def _kp_producer(bootstrap, **kw):
    return KafkaProducer(bootstrap_servers=bootstrap, client_id="interop-cli-kafka-python", acks="all",
                         linger_ms=5, enable_idempotence=c.IDEMPOTENCE, **kw)


def kafka_python_to_client(bootstrap, topic):
    t = topic + "-from-kafka-python"
    create(bootstrap, t, c.PARTITIONS)
    prod = _kp_producer(bootstrap)
    futs = [(k, prod.send(t, key=k.encode(), value=c.value_for(KP_LABEL, k).encode())) for k in c.KEYS]
    prod.flush(timeout=30)
    acked = [(f.get(timeout=30).partition, f.get(timeout=30).offset, k.encode(), c.value_for(KP_LABEL, k).encode())
             for k, f in futs]
    prod.close()
    got = client_read(bootstrap, t, want=len(c.KEYS))
    check_eq(sorted(got), sorted(acked), "client consume vs kafka-python's acknowledgements (partition, offset, key, value)")
    return "kafka-python default partitioner, client consume --exit = its acknowledgements exactly: " + check_keyed(got, KP_LABEL)


def kafka_python_codecs_to_client(bootstrap, topic):
    t = topic + "-from-kafka-python-z"
    create(bootstrap, t, len(c.CODECS) + 1)
    n = c.COMPRESSED_RECORDS
    for p, codec in enumerate(c.CODECS):
        prod = _kp_producer(bootstrap, compression_type=codec)
        values = [c.compressed_value(KP_LABEL, codec, i).encode() for i in range(n)]
        futs = [prod.send(t, key=f"k{i}".encode(), value=v, partition=p) for i, v in enumerate(values)]
        prod.flush(timeout=30)
        check_eq([f.get(timeout=30).offset for f in futs], list(range(n)), f"{codec}: acknowledged offsets")
        prod.close()
        c.check_codec_batches(bootstrap, t, p, codec, n)
        check_eq(client_read(bootstrap, t, p, want=n), [(p, i, f"k{i}".encode(), v) for i, v in enumerate(values)],
                 f"{codec}: records client consume read")
    p = len(c.CODECS)
    prod = _kp_producer(bootstrap)
    values = [binary_value(i) for i in range(BINARY_RECORDS)]
    futs = [prod.send(t, key=f"b{i}".encode(), value=v, partition=p) for i, v in enumerate(values)]
    prod.flush(timeout=30)
    check_eq([f.get(timeout=30).offset for f in futs], list(range(BINARY_RECORDS)), "binary: acknowledged offsets")
    prod.close()
    check_eq(client_read(bootstrap, t, p, want=BINARY_RECORDS),
             [(p, i, f"b{i}".encode(), v) for i, v in enumerate(values)], "binary values client consume read")
    return (f"kafka-python compression_type={'/'.join(c.CODECS)}: {n} records each, and {BINARY_RECORDS} binary "
            f"values, read byte-exact by client consume")


if __name__ == "__main__":
    c.run({
        "create-topic": create_topic,
        "produce-keyed": produce_keyed,
        "read-by-kcat": read_by_kcat,
        "read-by-kafka-python": read_by_kafka_python,
        "compression": compression,
        "kcat-to-client": kcat_to_client,
        "kcat-codecs-to-client": kcat_codecs_to_client,
        "kafka-python-to-client": kafka_python_to_client,
        "kafka-python-codecs-to-client": kafka_python_codecs_to_client,
    }, __doc__)
