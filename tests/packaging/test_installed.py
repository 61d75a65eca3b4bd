"""Run by tests/packaging/run.sh in a fresh venv where only the wheel (and pytest, confluent-kafka)
is installed: the binaries come from the package, never from a cargo build or the repository."""
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time

from confluent_kafka import Consumer, Producer

import partitioned_log_broker


def test_the_binaries_are_on_the_path_of_the_environment():
    scripts = sysconfig.get_path("scripts")
    for name in ("broker", "client"):
        assert shutil.which(name) == os.path.join(scripts, name)
    assert partitioned_log_broker.BROKER == os.path.join(scripts, "broker")


def test_a_consumer_group_that_read_everything_is_caught_up_and_in_order(kafka_broker):
    assert kafka_broker.client("topics", "create", "orders", "--partitions", "3").returncode == 0
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for i in range(200):
        producer.produce("orders", key=f"customer-{i % 7}", value=str(i))
    assert producer.flush(10) == 0

    # Before anyone consumed: not caught up (1), and every partition counts.
    behind = kafka_broker.client("groups", "wait", "billing", "--max-lag", "0", "--topic",
                                 "orders", "--timeout", "1", "--format", "json")
    assert behind.returncode == 1, behind.stderr
    assert json.loads(behind.stdout)["total_lag"] == 200

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": "billing",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    read = 0
    deadline = time.monotonic() + 60
    while read < 200 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            read += 1
    assert read == 200
    consumer.commit(asynchronous=False)
    consumer.close()

    waited = kafka_broker.client("groups", "wait", "billing", "--max-lag", "0", "--timeout", "10",
                                 "--format", "json")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    look = json.loads(waited.stdout)
    assert (look["caught_up"], look["total_lag"], len(look["partitions"])) == (True, 0, 3)
    order = kafka_broker.client("check", "order", "orders", "--seq", "value")
    assert order.returncode == 0, order.stdout + order.stderr
    assert order.stdout.startswith("checked 200 records of 7 keys"), order.stdout
    # What cannot be checked exits 2, not 1.
    assert kafka_broker.client("check", "order", "nosuch", "--seq", "value").returncode == 2


def test_a_killed_runner_leaves_no_broker():
    runner = subprocess.Popen(
        [sys.executable, "-c", "import time, partitioned_log_broker as p\n"
         "b = p.start_broker()\nprint(b.bootstrap, flush=True)\ntime.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    host, port = runner.stdout.readline().strip().rsplit(":", 1)
    socket.create_connection((host, int(port)), timeout=5).close()
    runner.kill()
    runner.wait()
    # Polled until it refuses; a minute of serving is a broker left behind.
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except ConnectionRefusedError:
            return
        assert time.monotonic() < deadline, "the broker outlived the runner that started it"
        time.sleep(0.05)
