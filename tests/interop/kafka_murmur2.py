"""Kafka's default partitioner for keyed records, bit for bit.

Java: org.apache.kafka.common.utils.Utils.murmur2 (MurmurHash2, seed 0x9747b28c,
little-endian 4-byte blocks, 32-bit wrap-around arithmetic) and
BuiltInPartitioner.partitionForKey: (murmur2(key) & 0x7fffffff) % numPartitions.

Run this file directly to self-check it against Kafka's and librdkafka's vectors.
"""

SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Utils.murmur2: returns the hash as Java's signed 32-bit int."""
    length = len(data)
    h = (SEED ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[i * 4:i * 4 + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R  # Java's >>> on an int: logical shift of the 32-bit value
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length % 4
    tail = n4 * 4
    # Java's switch falls through: case 3, then 2, then 1 (bytes sign-extended, masked to 8 bits)
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key, num_partitions: int) -> int:
    """Java's default partitioner for a non-null key (str keys are UTF-8 encoded)."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# Kafka UtilsTest.testMurmur2 (signed ints)
KAFKA_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}
# librdkafka rdmurmur2.c unit test (unsigned) and kafkajs's table (signed)
LIBRDKAFKA_VECTORS = {"kafka": 0xD067CF64, "giberish123456789": 0x8F552B0C, "": 0x106E08D9}
KAFKAJS_VECTORS = {"0": 971027396, "1": -1993445489}
# partitions stated by the reference (section 5) and by issue 2
PARTITION_VECTORS = [
    ("kafka", 3, 1), ("key1", 3, 2), ("key3", 3, 1), ("1", 3, 0),
    ("order-8842", 12, 4), ("order-8842", 24, 16),
]


def self_check() -> list:
    """Returns a list of failure strings (empty when every vector matches)."""
    failures = []
    for key, want in KAFKA_VECTORS.items():
        got = murmur2(key.encode())
        if got != want:
            failures.append(f"murmur2({key!r}) = {got}, Kafka says {want}")
    for key, want in LIBRDKAFKA_VECTORS.items():
        got = murmur2(key.encode()) & _MASK
        if got != want:
            failures.append(f"murmur2({key!r}) = {got:#x}, librdkafka says {want:#x}")
    for key, want in KAFKAJS_VECTORS.items():
        got = murmur2(key.encode())
        if got != want:
            failures.append(f"murmur2({key!r}) = {got}, kafkajs says {want}")
    for key, parts, want in PARTITION_VECTORS:
        got = partition_for_key(key, parts)
        if got != want:
            failures.append(f"partition({key!r}, {parts}) = {got}, expected {want}")
    return failures


if __name__ == "__main__":
    import sys

    errs = self_check()
    for e in errs:
        print("FAIL:", e)
    n = len(KAFKA_VECTORS) + len(LIBRDKAFKA_VECTORS) + len(KAFKAJS_VECTORS) + len(PARTITION_VECTORS)
    if errs:
        print(f"FAIL murmur2 self-check: {n - len(errs)}/{n} vectors match")
    else:
        print(f"ok murmur2 self-check: {n}/{n} vectors match (Kafka UtilsTest, librdkafka, kafkajs, "
              f"order-8842 -> 4 of 12, 16 of 24)")
    sys.exit(1 if errs else 0)
