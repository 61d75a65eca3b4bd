"""kafka-python 2.0.2's KafkaAdminClient on one group, run in .venv-kp2 by groups_interop.py:

    python kp2_admin.py --bootstrap HOST:PORT --group G

prints one JSON object: {"describe": ..., "offsets": {"TOPIC:P": OFFSET}} from
describe_consumer_groups([G]) (member metadata and assignments decoded by kafka-python itself) and
list_consumer_group_offsets(G). Any exception (a DescribeGroups answer that kafka-python cannot
parse, a group error) is printed and exits 1.
"""

import argparse
import json
import sys

import kafka
from kafka import KafkaAdminClient


def _member(m):
    meta, asg = m.member_metadata, m.member_assignment
    return {
        "member_id": m.member_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "subscription": list(meta.subscription) if meta else None,
        "assignment": {t: sorted(ps) for t, ps in asg.assignment} if asg else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    args = ap.parse_args()
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, client_id="interop-kp2-admin",
                             request_timeout_ms=15000)
    [g] = admin.describe_consumer_groups([args.group])
    describe = {
        "error_code": g.error_code, "group": g.group, "state": g.state,
        "protocol_type": g.protocol_type, "protocol": g.protocol,
        "members": [_member(m) for m in g.members],
    }
    offsets = admin.list_consumer_group_offsets(args.group)
    admin.close()
    print(json.dumps({
        "kafka_python": kafka.__version__,
        "describe": describe,
        "offsets": {f"{tp.topic}:{tp.partition}": om.offset for tp, om in offsets.items()},
    }))


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001 - the driver reports the traceback
        import traceback
        traceback.print_exc(file=sys.stdout)
        sys.exit(1)
