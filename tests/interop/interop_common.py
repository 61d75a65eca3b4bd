"""Shared data, assertions and plumbing for the interop scenarios.

Every client script (kcat_interop.py, kafka_python_interop.py, confluent_interop.py) is run as
    python <script> --bootstrap HOST:PORT --topic NAME <scenario>
one scenario per process, in the order run.sh gives. Scenarios of one client share a topic name
and build on each other (create, then produce, then read back, ...); each one asserts exact
counts, offsets and partitions against what the earlier steps must have left in the broker.
A scenario prints one summary line on success and exits 0; on failure it prints the reason and
exits 1.
"""

import argparse
import os
import socket
import struct
import sys
import time
import traceback

from kafka_murmur2 import partition_for_key

# ---------------------------------------------------------------------------------------------
# Producers are idempotent unless INTEROP_IDEMPOTENCE=0: kafka-python 3.x is by default, and
# librdkafka-based clients take enable.idempotence=true. With 0 every producer in the scenarios
# is explicitly non-idempotent (plain batches, producer id -1).
IDEMPOTENCE = os.environ.get("INTEROP_IDEMPOTENCE", "1") == "1"
# ---------------------------------------------------------------------------------------------

DEBUG = os.environ.get("INTEROP_DEBUG", "0") == "1"

PARTITIONS = 12
GROWN_PARTITIONS = 24
GROW_KEY = "order-8842"
GROW_KEY_PARTITION_12 = 4
GROW_KEY_PARTITION_24 = 16

# 1,000 keys, order-8000 .. order-8999; order-8842 is one of them.
KEYS = [f"order-{8000 + i}" for i in range(1000)]
CODECS = ["gzip", "snappy", "lz4", "zstd"]
# Kafka's attribute bits 0-2
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSED_RECORDS = 200


def value_for(client: str, key: str) -> str:
    return f"{client}|{key}|payload"


def compressed_value(client: str, codec: str, i: int) -> str:
    # Very compressible, so no client has a reason to send it uncompressed.
    return f"{client}-{codec}-{i:06d}-" + "abcdefgh" * 16


def expected_counts(partitions: int = None) -> dict:
    partitions = partitions or PARTITIONS
    counts = {p: 0 for p in range(partitions)}
    for k in KEYS:
        counts[partition_for_key(k, partitions)] += 1
    return counts


def expected_grown_end_offsets() -> dict:
    """End offsets after the grow step: the 12 old partitions as before, order-8842 once in 16."""
    ends = {p: 0 for p in range(GROWN_PARTITIONS)}
    ends.update(expected_counts(PARTITIONS))
    ends[GROW_KEY_PARTITION_24] += 1
    return ends


class Fail(AssertionError):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def check_eq(got, want, what):
    if got != want:
        raise Fail(f"{what}: got {got!r}, expected {want!r}")


def check_keyed_log(records, client: str, partitions: int = None) -> str:
    """records: iterable of (partition, offset, key, value) read back from the broker.

    Exactly the 1,000 keyed records, each in Java's murmur2 partition for `partitions`,
    with offsets 0..n-1 on every partition and the value the producer sent.
    """
    partitions = partitions or PARTITIONS
    records = list(records)
    want_counts = expected_counts(partitions)
    check_eq(len(records), len(KEYS), "number of records read back")
    by_part = {}
    seen = {}
    for p, off, key, value in records:
        check(key is not None, f"record at partition {p} offset {off} has no key")
        check(key not in seen, f"key {key} read twice: {seen.get(key)} and {(p, off)}")
        seen[key] = (p, off)
        want_p = partition_for_key(key, partitions)
        check(p == want_p, f"key {key} is in partition {p}, Java's murmur2 puts it in {want_p}")
        check_eq(value, value_for(client, key), f"value of {key}")
        by_part.setdefault(p, []).append(off)
    check_eq(set(seen), set(KEYS), "set of keys read back")
    for p in range(partitions):
        offs = sorted(by_part.get(p, []))
        check_eq(len(offs), want_counts[p], f"record count of partition {p}")
        check(offs == list(range(len(offs))),
              f"partition {p} offsets are not 0..{len(offs) - 1}: {offs[:10]}...")
    check_eq(seen[GROW_KEY][0], GROW_KEY_PARTITION_12, f"partition of {GROW_KEY}")
    nonempty = sum(1 for c in want_counts.values() if c)
    return (f"{len(records)} records, {nonempty}/{partitions} partitions, offsets 0..n-1 everywhere, "
            f"every key in its murmur2 partition ({GROW_KEY} in {seen[GROW_KEY][0]})")


def wait_until(fn, timeout: float, what: str, interval: float = 0.2):
    """Polls fn() until it returns a truthy value; returns it, or fails after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - keep polling, report the last one
            last = e
        if time.monotonic() > deadline:
            raise Fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def check_send_order(records, keys) -> None:
    """records: (partition, offset, key, value); keys: the keys in the order they were sent.
    On every partition, the keys in offset order are the keys sent there, in send order."""
    sent = {k: i for i, k in enumerate(keys)}
    by_part = {}
    for p, off, key, _ in sorted(records, key=lambda r: (r[0], r[1])):
        by_part.setdefault(p, []).append(key)
    for p, got in by_part.items():
        check_eq(got, sorted(got, key=sent.__getitem__), f"keys of partition {p} in offset order vs send order")


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def client_bin() -> str:
    """Our CLI: INTEROP_CLIENT_BIN (run.sh sets it), else target/release/client, else debug."""
    path = os.environ.get("INTEROP_CLIENT_BIN")
    if path:
        return path
    for profile in ("release", "debug"):
        cand = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), profile, "client")
        if os.access(cand, os.X_OK):
            return cand
    raise Fail("no client binary: build it with `cargo build --release -p client` or set INTEROP_CLIENT_BIN")


def split_addr(bootstrap: str):
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


# ---------------------------------------------------------------------------------------------
# A raw Fetch v4 over a socket, to look at the stored record-batch headers themselves: which
# codec the client really used (librdkafka silently sends uncompressed batches to brokers it
# thinks cannot take them), and that every batch still has a valid CRC-32C.
# ---------------------------------------------------------------------------------------------

def _crc32c(data: bytes) -> int:
    try:
        import crc32c as _c  # optional C implementation
        return _c.crc32c(data)
    except ImportError:
        from kafka.record._crc32c import crc as _crc  # pure Python, ships with kafka-python
        return _crc(data)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise Fail(f"connection closed by the broker after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def raw_fetch_batches(bootstrap: str, topic: str, partition: int, offset: int = 0,
                      max_bytes: int = 16 * 1024 * 1024):
    """One Fetch v4 (non-flexible) for one partition. Returns (high_watermark, batches); each batch
    is a dict with base_offset, last_offset, count, codec, crc_ok. Fails on a partition error."""
    host, port = split_addr(bootstrap)
    t = topic.encode()
    body = struct.pack(">iiiib", -1, 500, 1, max_bytes, 0)          # replica, wait, min, max, iso
    body += struct.pack(">i", 1) + struct.pack(">h", len(t)) + t    # 1 topic
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, max_bytes)
    client_id = b"interop-rawfetch"
    header = struct.pack(">hhih", 1, 4, 7, len(client_id)) + client_id
    frame = header + body
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        resp = _recv_exact(s, size)
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, resp, pos)
        pos += struct.calcsize(fmt)
        return vals if len(vals) > 1 else vals[0]

    check_eq(take(">i"), 7, "raw fetch correlation id")
    take(">i")  # throttle
    ntopics = take(">i")
    check_eq(ntopics, 1, "raw fetch topic count")
    tlen = take(">h")
    pos += tlen
    check_eq(take(">i"), 1, "raw fetch partition count")
    pidx, err, hw, lso = take(">ihqq")
    check_eq((pidx, err), (partition, 0), "raw fetch partition index and error code")
    naborted = take(">i")
    pos += max(naborted, 0) * 16
    rlen = take(">i")
    records = resp[pos:pos + rlen] if rlen > 0 else b""
    batches = []
    i = 0
    while i + 61 <= len(records):
        base, blen = struct.unpack_from(">qi", records, i)
        if i + 12 + blen > len(records):
            break  # partial trailing batch, allowed by the protocol
        batch = records[i:i + 12 + blen]
        magic = batch[16]
        crc = struct.unpack_from(">I", batch, 17)[0]
        attrs, last_delta = struct.unpack_from(">hi", batch, 21)
        producer_id, producer_epoch, base_seq, count = struct.unpack_from(">qhii", batch, 43)
        batches.append({
            "base_offset": base, "last_offset": base + last_delta, "count": count,
            "magic": magic, "codec": attrs & 0x7, "crc_ok": _crc32c(batch[21:]) == crc,
            "producer_id": producer_id, "base_sequence": base_seq,
        })
        i += 12 + blen
    return hw, batches


def check_codec_batches(bootstrap: str, topic: str, partition: int, codec: str, n: int,
                        idempotent: bool = None) -> str:
    """All n records of the partition sit in CRC-valid magic-2 batches compressed with codec,
    with contiguous offsets 0..n-1; idempotent (producer id >= 0, sequences 0..n-1) exactly when
    `idempotent` (default: IDEMPOTENCE) is on, plain (producer id -1, sequence -1) otherwise."""
    idempotent = IDEMPOTENCE if idempotent is None else idempotent
    hw, batches = raw_fetch_batches(bootstrap, topic, partition)
    check_eq(hw, n, f"high watermark of partition {partition}")
    check(batches, f"raw fetch of partition {partition} returned no batch")
    nxt = 0
    for b in batches:
        check_eq(b["magic"], 2, f"magic of batch at {b['base_offset']}")
        check(b["crc_ok"], f"CRC-32C of batch at {b['base_offset']} does not match its bytes")
        check_eq(b["codec"], CODEC_IDS[codec], f"codec bits of batch at {b['base_offset']}")
        check_eq(b["base_offset"], nxt, "batch base offset (batches must be contiguous)")
        if idempotent:
            check(b["producer_id"] >= 0, f"batch at {b['base_offset']} has no producer id (idempotence on)")
            check_eq(b["base_sequence"], b["base_offset"], f"base sequence of batch at {b['base_offset']}")
        else:
            check_eq((b["producer_id"], b["base_sequence"]), (-1, -1),
                     f"producer id/base sequence of batch at {b['base_offset']} (idempotence off)")
        check_eq(b["last_offset"] - b["base_offset"] + 1, b["count"],
                 f"lastOffsetDelta+1 vs record count of batch at {b['base_offset']}")
        nxt = b["last_offset"] + 1
    check_eq(nxt, n, f"offset after the last batch fetched from partition {partition}")
    idem = f"producer id {batches[0]['producer_id']}" if idempotent else "non-idempotent"
    return f"{len(batches)} {codec} batch(es), CRC ok, {idem}"


# ---------------------------------------------------------------------------------------------

def run(scenarios: dict, description: str, add_args=None):
    """Runs the scenario named on the command line. With add_args(parser), the script's own
    options are parsed too and each scenario is called as fn(bootstrap, topic, args)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker")
    ap.add_argument("--topic", required=True, help="base topic name of this client's scenarios")
    if add_args:
        add_args(ap)
    ap.add_argument("scenario", choices=list(scenarios))
    args = ap.parse_args()
    if DEBUG:
        import logging
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
    t0 = time.monotonic()
    try:
        extra = (args,) if add_args else ()
        summary = scenarios[args.scenario](args.bootstrap, args.topic, *extra)
    except Fail as e:
        print(f"FAIL {args.scenario}: {e}")
        sys.exit(1)
    except Exception:  # noqa: BLE001 - an unexpected client error is a failure too
        print(f"FAIL {args.scenario}: unexpected exception")
        traceback.print_exc(file=sys.stdout)
        sys.exit(1)
    print(f"ok {args.scenario}: {summary} ({time.monotonic() - t0:.1f}s)")
    sys.exit(0)
