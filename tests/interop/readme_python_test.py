"""The Python example of docs/testing.md ("Testing your service against this broker"), run by run.sh.

A test starts its own broker on a free port, produces with any client (kafka-python here), lets
the service under test consume, then asks `client` whether the group caught up, what its lag is
(JSON), and whether the output topic is in order per key. BROKER and CLIENT name the binaries.
"""
import json
import os
import subprocess

from kafka import KafkaConsumer, KafkaProducer

BROKER = os.environ.get("BROKER", "target/release/broker")
CLIENT = os.environ.get("CLIENT", "target/release/client")


def client(addr, *args):
    return subprocess.run([CLIENT, "--bootstrap", addr, *args], capture_output=True, text=True)


def my_service(addr):
    """Stands in for the service under test: reads orders in group billing, writes receipts."""
    consumer = KafkaConsumer("orders", bootstrap_servers=addr, group_id="billing",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    producer = KafkaProducer(bootstrap_servers=addr)
    for record in consumer:
        producer.send("receipts", key=record.key, value=record.value,
                      headers=[("seq", str(record.offset).encode())])
    producer.flush()
    consumer.commit()
    consumer.close()


def test_every_order_gets_a_receipt_in_order():
    broker = subprocess.Popen([BROKER, "--listen", "127.0.0.1:0", "--exit-with-parent"],
                              stdout=subprocess.PIPE, text=True)
    addr = broker.stdout.readline().split()[-1]  # "broker listening on 127.0.0.1:PORT"
    try:
        for topic in ("orders", "receipts"):
            assert client(addr, "topics", "create", topic, "--partitions", "3").returncode == 0
        producer = KafkaProducer(bootstrap_servers=addr)
        for i in range(100):
            producer.send("orders", key=f"customer-{i % 7}".encode(), value=b"paid")
        producer.flush()

        my_service(addr)

        waited = client(addr, "groups", "wait", "billing", "--max-lag", "0", "--timeout", "10")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        lag = json.loads(client(addr, "groups", "lag", "billing", "--format", "json").stdout)
        assert lag["total_lag"] == 0 and len(lag["partitions"]) == 3
        order = client(addr, "check", "order", "receipts", "--seq", "header:seq")
        assert order.returncode == 0, order.stdout + order.stderr
    finally:
        broker.terminate()
        broker.wait()


if __name__ == "__main__":
    test_every_order_gets_a_receipt_in_order()
    print("ok readme-python: the Python example of docs/testing.md passed")
