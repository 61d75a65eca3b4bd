"""One consumer-group member, driven by groups_interop.py: kafka-python (3.x in .venv, 2.0.2 in
.venv-kp2; this file runs under both) or confluent-kafka.

    python group_member.py --client kafka-python|confluent-kafka --bootstrap HOST:PORT \
        --topic T --group G --client-id ID

It subscribes to T as a member of G (auto.offset.reset earliest, auto-commit off, heartbeats every
500 ms so rebalances are quick) and reports on stdout, one JSON object per line:

    {"ev": "assigned", "member": ID, "partitions": [..]}   after every assignment
    {"ev": "revoked", "partitions": [..]}                   before every revocation
    {"ev": "rec", "p": P, "o": O, "k": KEY, "v": VALUE}     every record, in delivery order
    {"ev": "commit", "offsets": {P: O}}                     after every synchronous commit
    {"ev": "log", "msg": ...}                               kafka-python's JoinGroup log lines
    {"ev": "error", "msg": ...}                             anything unexpected
    {"ev": "closed"}                                        after close() (LeaveGroup) on "leave"

It commits synchronously after every poll that returned records, so nothing it has reported is
left uncommitted when a rebalance comes (the group's records are produced only once the
assignment is stable). A line "leave" on stdin closes the consumer, which sends LeaveGroup.
"""

import argparse
import json
import logging
import os
import sys
import threading

_out_lock = threading.Lock()


def emit(**ev):
    with _out_lock:
        sys.stdout.write(json.dumps(ev) + "\n")
        sys.stdout.flush()


def _text(b):
    return None if b is None else b.decode("utf-8")


def watch_stdin(stop: threading.Event):
    for line in sys.stdin:
        if line.strip() == "leave":
            break
    stop.set()  # "leave" or EOF (the driver went away)


class JoinLog(logging.Handler):
    """Forwards kafka-python's coordinator log lines about JoinGroup (the request it sent with
    its version, each answer, each error) so the driver can check what was on the wire."""

    def emit(self, record):
        msg = record.getMessage()
        if ("JoinGroupRequest" in msg or "JoinGroupResponse" in msg or "join group" in msg
                or record.levelno >= logging.WARNING):
            emit(ev="log", level=record.levelname, msg=msg[:1500])


def run_kafka_python(args, stop):
    import kafka
    from kafka import KafkaConsumer, ConsumerRebalanceListener

    log = logging.getLogger("kafka")
    log.setLevel(logging.DEBUG)
    log.addHandler(JoinLog())
    if os.environ.get("INTEROP_DEBUG") == "1":
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        log.addHandler(h)

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        client_id=args.client_id,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        heartbeat_interval_ms=500,
        session_timeout_ms=10000,
        request_timeout_ms=30000,
    )

    def member_id():
        return consumer._coordinator._generation.member_id  # same attribute in 2.0.2 and 3.x

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(ev="revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            emit(ev="assigned", member=member_id(), partitions=sorted(tp.partition for tp in assigned))

    consumer.subscribe([args.topic], listener=Listener())
    emit(ev="started", client=f"kafka-python {kafka.__version__}")
    while not stop.is_set():
        batches = consumer.poll(timeout_ms=200)
        got = False
        for tp, recs in sorted(batches.items(), key=lambda kv: kv[0].partition):
            for r in recs:
                got = True
                emit(ev="rec", p=r.partition, o=r.offset, k=_text(r.key), v=_text(r.value))
        if got:
            consumer.commit()  # synchronous: the positions of every assigned partition
            positions = {tp.partition: consumer.position(tp) for tp in consumer.assignment()}
            emit(ev="commit", offsets=positions)
    consumer.close()  # LeaveGroup (auto-commit is off, so no commit here)
    emit(ev="closed")


def run_confluent(args, stop):
    import confluent_kafka
    from confluent_kafka import Consumer, KafkaError

    conf = {
        "bootstrap.servers": args.bootstrap,
        "client.id": args.client_id,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "heartbeat.interval.ms": 500,
        "session.timeout.ms": 10000,
    }
    if os.environ.get("INTEROP_DEBUG") == "1":
        conf["debug"] = "cgrp,protocol,broker,fetch"
    consumer = Consumer(conf)

    def on_assign(c, parts):
        emit(ev="assigned", member=c.memberid(), partitions=sorted(tp.partition for tp in parts))

    def on_revoke(c, parts):
        emit(ev="revoked", partitions=sorted(tp.partition for tp in parts))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    emit(ev="started", client=f"confluent-kafka {confluent_kafka.version()[0]} "
                              f"(librdkafka {confluent_kafka.libversion()[0]})")
    while not stop.is_set():
        msgs = consumer.consume(num_messages=500, timeout=0.2)
        got = False
        for m in msgs:
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    emit(ev="error", msg=str(m.error()))
                continue
            got = True
            emit(ev="rec", p=m.partition(), o=m.offset(), k=_text(m.key()), v=_text(m.value()))
        if got:
            committed = consumer.commit(asynchronous=False)
            emit(ev="commit", offsets={tp.partition: tp.offset for tp in committed})
    consumer.close()  # unassign and LeaveGroup
    emit(ev="closed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--client", required=True, choices=["kafka-python", "confluent-kafka"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--client-id", required=True)
    args = ap.parse_args()
    stop = threading.Event()
    threading.Thread(target=watch_stdin, args=(stop,), daemon=True).start()
    try:
        (run_kafka_python if args.client == "kafka-python" else run_confluent)(args, stop)
    except Exception as e:  # noqa: BLE001 - reported to the driver, which fails the scenario
        import traceback
        traceback.print_exc(file=sys.stderr)
        emit(ev="error", msg=f"{type(e).__name__}: {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
