"""Consumer groups of real clients against our broker (issue 4), one scenario per process:

    python groups_interop.py --bootstrap HOST:PORT --topic T --client CLIENT SCENARIO

CLIENT is kafka-python (3.x, .venv), kafka-python-2.0.2 (.venv-kp2, Python 3.11), confluent-kafka,
kcat (`kcat -G`, librdkafka 2.0.2) or kafkajs (2.2.4, kafkajs/member.js). Every group has members
of one client only: kafkajs offers only RoundRobinAssigner, the others range first.

Members are separate processes (group_member.py, kafkajs/member.js, kcat itself) that report their
assignments and records; the records are produced here with kafka-python, keyed, on a 6-partition
topic, in three waves whose per-partition counts murmur2 fixes (A: a-0..a-299, B: b-0..b-119,
C: c-0..c-59). The scenarios build on each other through the broker's committed offsets:

- split: two members split the 6 partitions disjointly, exactly as their assignor must (range:
  the smaller member id takes 0-2; round robin: 0, 2, 4); then wave A is produced and consumed
  exactly once across the group and committed.
- rejoin-leave: two new members resume from the committed offsets (nothing is delivered again),
  one leaves (LeaveGroup) and the other gets all 6 partitions; wave B is produced and that member
  consumes it exactly once and commits; it leaves.
- lag: the group is Empty; wave C is produced and never consumed, so the lag of every partition
  is exactly its share of C.

After each, three readers must agree with each other and with produced minus consumed, partition
by partition: our `client groups describe G` (kafka-consumer-groups.sh columns), kafka-python
3.x's KafkaAdminClient (describe_groups, list_group_offsets) with KafkaConsumer.end_offsets, and
kafka-python 2.0.2's KafkaAdminClient (describe_consumer_groups, list_consumer_group_offsets),
including who owns each partition while members are active.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

import interop_common as c
from interop_common import Fail, check, check_eq
from kafka_murmur2 import partition_for_key

HERE = os.path.dirname(os.path.abspath(__file__))
PARTITIONS = 6
WAVES = {"A": [f"a-{i}" for i in range(300)], "B": [f"b-{i}" for i in range(120)],
         "C": [f"c-{i}" for i in range(60)]}
CLIENTS = ["kafka-python", "kafka-python-2.0.2", "confluent-kafka", "kcat", "kafkajs"]
KP2_PYTHON = os.environ.get("INTEROP_KP2_PYTHON", os.path.join(HERE, ".venv-kp2", "bin", "python"))
NODE = os.environ.get("NODE", "node")
KCAT = os.environ.get("KCAT", "kcat")
SPLIT_TIMEOUT = 40.0


def counts(keys):
    n = {p: 0 for p in range(PARTITIONS)}
    for k in keys:
        n[partition_for_key(k, PARTITIONS)] += 1
    return n


def add(*dicts):
    return {p: sum(d[p] for d in dicts) for p in range(PARTITIONS)}


def value_for(client, key):
    # multi-byte UTF-8 and a colon: bytes must come back exactly
    return f"{client}|{key}|grüße:日本"


def group_name(topic):
    return topic + "-g"


_T0 = time.monotonic()


def say(*a):
    print(f"[{time.monotonic() - _T0:6.2f}s]", *a, flush=True)


# ---------------------------------------------------------------------------------------------
# Members
# ---------------------------------------------------------------------------------------------

KCAT_REBALANCE = re.compile(r"% Group (\S+) rebalanced \(memberid (\S+)\): (assigned|revoked): ?(.*)")


class Member:
    """A member process of one client; reads its reports in background threads."""

    def __init__(self, client, bootstrap, topic, group, name):
        self.client, self.name = client, name
        self.client_id = f"interop-{client.replace('.', '')}-{name}"
        self.member_id = None
        self.assignment = None  # set of partitions, None while unassigned
        self.assignments = []   # every assignment reported, in order
        self.records = []       # (partition, offset, key, value)
        self.logs = []          # kafka-python's JoinGroup log lines
        self.errors = []
        self.events = []
        self.closed = False
        self._lock = threading.Lock()
        if client == "kcat":
            cmd = [KCAT, "-b", bootstrap, "-G", group, topic, "-J", "-u",
                   "-X", f"client.id={self.client_id}", "-X", "heartbeat.interval.ms=500",
                   "-X", "session.timeout.ms=10000", "-X", "auto.offset.reset=earliest"]
            # kcat commits on librdkafka's auto-commit timer (5 s; kcat's -X auto.commit.interval.ms
            # sets only the legacy topic property of that name) and when it closes
            if c.DEBUG:
                cmd += ["-d", "cgrp,protocol,broker"]
        elif client == "kafkajs":
            cmd = [NODE, os.path.join(HERE, "kafkajs", "member.js"), bootstrap, topic, group, self.client_id]
        else:
            py = KP2_PYTHON if client == "kafka-python-2.0.2" else sys.executable
            lib = "confluent-kafka" if client == "confluent-kafka" else "kafka-python"
            cmd = [py, os.path.join(HERE, "group_member.py"), "--client", lib, "--bootstrap", bootstrap,
                   "--topic", topic, "--group", group, "--client-id", self.client_id]
        say(f"[{name}] $ {' '.join(cmd)}")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    # -- reports ---------------------------------------------------------------------------
    def _event(self, ev):
        with self._lock:
            kind = ev.get("ev")
            if kind == "rec":
                self.records.append((ev["p"], ev["o"], ev["k"], ev["v"]))
                return
            self.events.append(ev)
            if kind == "assigned":
                self.member_id = ev["member"]
                self.assignment = set(ev["partitions"])
                self.assignments.append(sorted(ev["partitions"]))
            elif kind == "revoked":
                self.assignment = None
            elif kind == "log":
                self.logs.append(ev["msg"])
                if not ("JoinGroup" in ev["msg"] or "join group" in ev["msg"]):
                    return  # a warning kafka-python logs, shown only with the errors below
            elif kind == "error":
                self.errors.append(ev["msg"])
            elif kind == "closed":
                self.closed = True
        if kind != "log":
            say(f"[{self.name}] {json.dumps(ev, ensure_ascii=False)[:400]}")

    def _read_stdout(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                say(f"[{self.name}] stdout: {line[:400]}")
                continue
            if self.client == "kcat":  # kcat -J: one JSON object per record
                ev = {"ev": "rec", "p": ev["partition"], "o": ev["offset"], "k": ev["key"], "v": ev["payload"]}
            self._event(ev)

    def _read_stderr(self):
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            m = KCAT_REBALANCE.match(line) if self.client == "kcat" else None
            if m:
                parts = [int(x) for x in re.findall(r"\[(\d+)\]", m.group(4))]
                ev = {"ev": m.group(3), "member": m.group(2), "partitions": sorted(parts)}
                if m.group(3) == "revoked":
                    ev.pop("member")
                self._event(ev)
            elif self.client == "kcat" and ("ERROR" in line or "FAIL" in line):
                self._event({"ev": "error", "msg": line})
            elif not line.startswith("% Reached end of topic"):
                say(f"[{self.name}] stderr: {line[:600]}")

    def snapshot(self):
        with self._lock:
            return (self.member_id, None if self.assignment is None else set(self.assignment),
                    list(self.records))

    # -- control ---------------------------------------------------------------------------
    def leave(self, timeout=25):
        """Closes the consumer the client's own way (LeaveGroup) and waits for the process."""
        if self.proc.poll() is None:
            if self.client == "kcat":
                self.proc.send_signal(signal.SIGTERM)  # kcat closes the consumer on SIGTERM
            else:
                self.proc.stdin.write("leave\n")
                self.proc.stdin.flush()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Fail(f"member {self.name} ({self.client}) did not exit within {timeout}s of being told to leave")
        for t in self._threads:
            t.join(timeout=5)
        check_eq(rc, 0, f"exit status of member {self.name} ({self.client}) after leaving")
        if self.client != "kcat":
            check(self.closed, f"member {self.name} did not report a clean close")
        check_eq(self.errors, [], f"errors reported by member {self.name}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its Popen handle
            self.proc.wait(timeout=10)


def member_clients(client):
    """"X" gives two members of client X; "X+Y" one of each (member a is X, b is Y)."""
    parts = client.split("+")
    return parts * 2 if len(parts) == 1 else parts


def start_members(client, bootstrap, topic, group, names):
    members = []
    try:
        for n, member_client in zip(names, member_clients(client)):
            members.append(Member(member_client, bootstrap, topic, group, n))
            if len(members) < len(names):
                # the first one joins alone first: the second join is a real rebalance
                c.wait_until(lambda: members[-1].snapshot()[1] is not None or members[-1].proc.poll() is not None,
                             SPLIT_TIMEOUT, f"member {n}'s first assignment")
                check(members[-1].proc.poll() is None, f"member {n} exited early")
        return members
    except BaseException:
        for m in members:
            m.kill()
        raise


def expected_split(protocol, member_ids):
    """What the assignor must give two members of one 6-partition topic."""
    lo, hi = sorted(member_ids)
    if protocol == "range":
        return {lo: {0, 1, 2}, hi: {3, 4, 5}}
    if protocol in ("roundrobin", "RoundRobinAssigner"):
        return {lo: {0, 2, 4}, hi: {1, 3, 5}}
    raise Fail(f"unexpected assignment protocol {protocol!r}")


def wait_split(members, what):
    """Both members assigned, disjoint, together all 6: returns {member_id: partitions}."""
    def ready():
        for m in members:
            check(m.proc.poll() is None, f"member {m.name} exited (status {m.proc.returncode})")
            check_eq(m.errors, [], f"errors reported by member {m.name}")
        snaps = [m.snapshot() for m in members]
        if any(a is None or not a for _, a, _ in snaps):
            return None
        sets = [a for _, a, _ in snaps]
        if sum(len(s) for s in sets) != PARTITIONS or set().union(*sets) != set(range(PARTITIONS)):
            return None
        return {mid: a for mid, a, _ in snaps}
    return c.wait_until(ready, SPLIT_TIMEOUT, what)


def wait_single(member, what):
    def ready():
        check(member.proc.poll() is None, f"member {member.name} exited")
        _, a, _ = member.snapshot()
        return a == set(range(PARTITIONS))
    c.wait_until(ready, SPLIT_TIMEOUT, what)


# ---------------------------------------------------------------------------------------------
# Producing and the three readers
# ---------------------------------------------------------------------------------------------

def produce_wave(bootstrap, topic, client, wave):
    prod = KafkaProducer(bootstrap_servers=bootstrap, client_id="interop-groups-producer", acks="all",
                         linger_ms=5, enable_idempotence=c.IDEMPOTENCE)
    futs = [(k, prod.send(topic, key=k.encode(), value=value_for(client, k).encode())) for k in WAVES[wave]]
    prod.flush(timeout=30)
    out = []
    for k, f in futs:
        md = f.get(timeout=30)
        check_eq(md.partition, partition_for_key(k, PARTITIONS), f"partition of {k}")
        out.append((md.partition, md.offset, k, value_for(client, k)))
    prod.close()
    say(f"wave {wave}: {len(out)} records produced (kafka-python), per partition {list(counts(WAVES[wave]).values())}")
    return out


def end_offsets(bootstrap, topic):
    cons = KafkaConsumer(bootstrap_servers=bootstrap, client_id="interop-groups-ends", group_id=None)
    ends = {tp.partition: o for tp, o in
            cons.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)]).items()}
    cons.close()
    return ends


def our_describe(bootstrap, group):
    """`client groups describe G`: (rows {partition: dict}, stdout, stderr)."""
    cmd = [c.client_bin(), "--bootstrap", bootstrap, "groups", "describe", group]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    say(f"$ {' '.join(cmd)}  (exit {r.returncode})\n{r.stdout.rstrip()}\n{('stderr: ' + r.stderr.strip()) if r.stderr.strip() else ''}")
    check_eq(r.returncode, 0, f"exit status of client groups describe (stderr {r.stderr!r})")
    lines = [ln for ln in r.stdout.split("\n") if ln.strip()]
    check(lines and lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                         "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
          f"client groups describe header: {lines[:1]}")
    rows = {}
    for ln in lines[1:]:
        f = ln.split()
        check_eq(len(f), 9, f"columns in row {ln!r}")
        num = lambda s: None if s == "-" else int(s)  # noqa: E731
        check_eq(f[0], group, "GROUP column")
        rows[int(f[2])] = {"topic": f[1], "current": num(f[3]), "end": num(f[4]), "lag": num(f[5]),
                           "member": f[6], "host": f[7], "client_id": f[8]}
    return rows, r.stdout, r.stderr


def our_describe_view(bootstrap, group, view):
    """`client groups describe G --members|--state`: the data rows, split on whitespace."""
    cmd = [c.client_bin(), "--bootstrap", bootstrap, "groups", "describe", group, view]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    say(f"$ {' '.join(cmd)}  (exit {r.returncode})\n{r.stdout.rstrip()}")
    check_eq(r.returncode, 0, f"exit status of client groups describe {view} (stderr {r.stderr!r})")
    lines = [ln for ln in r.stdout.split("\n") if ln.strip()]
    header = {"--members": ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
              "--state": ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]}[view]
    check(lines and lines[0].split() == header, f"client groups describe {view} header: {lines[:1]}")
    return [ln.split() for ln in lines[1:]]


def kp2_view(bootstrap, group):
    r = subprocess.run([KP2_PYTHON, os.path.join(HERE, "kp2_admin.py"), "--bootstrap", bootstrap, "--group", group],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"kafka-python 2.0.2 describe_consumer_groups/list_consumer_group_offsets failed:\n{r.stdout}{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def members_owning(members_desc, topic):
    """{partition: (member_id, client_id, host)} from an admin client's member list."""
    owners = {}
    for m in members_desc:
        for p in (m["assignment"] or {}).get(topic, []):
            check(p not in owners, f"partition {p} assigned to two members in DescribeGroups")
            owners[p] = (m["member_id"], m["client_id"], m["client_host"])
    return owners


def check_readers(bootstrap, topic, group, committed, ends, owners, state):
    """Our CLI, kafka-python 3.x and kafka-python 2.0.2 against the expected committed offsets and
    log end offsets per partition, and owners {partition: member} (empty when no member)."""
    want_lag = {p: ends[p] - committed[p] for p in range(PARTITIONS)}
    # kafka-python 3.x
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-groups-admin", request_timeout_ms=15000)
    desc3 = admin.describe_groups([group])[group]
    broker_id = admin.describe_cluster()["brokers"][0]["broker_id"]
    offs3 = {tp.partition: om.offset for tp, om in admin.list_group_offsets(group)[group].items() if tp.topic == topic}
    admin.close()
    ends3 = end_offsets(bootstrap, topic)
    check_eq(desc3["error"], None, "kafka-python 3.x describe_groups error")
    check_eq(desc3["group_state"], state, "group state (kafka-python 3.x describe_groups)")
    m3 = [{"member_id": m["member_id"], "client_id": m["client_id"], "client_host": m["client_host"],
           "assignment": {a["topic"]: sorted(a["partitions"])
                          for a in (m["member_assignment"] or {}).get("assigned_partitions", [])}}
          for m in desc3["members"]]
    # kafka-python 2.0.2
    v2 = kp2_view(bootstrap, group)
    d2 = v2["describe"]
    check_eq((d2["error_code"], d2["state"], d2["protocol_type"]), (0, state, "consumer"),
             "error/state/protocol type (kafka-python 2.0.2 describe_consumer_groups)")
    offs2 = {int(k.split(":")[1]): o for k, o in v2["offsets"].items() if k.rsplit(":", 1)[0] == topic}
    # ours
    rows, _, err = our_describe(bootstrap, group)

    check_eq(ends3, ends, "log end offsets (KafkaConsumer.end_offsets)")
    check_eq(offs3, committed, "committed offsets (kafka-python 3.x list_group_offsets)")
    check_eq(offs2, committed, "committed offsets (kafka-python 2.0.2 list_consumer_group_offsets)")
    check_eq(sorted(rows), list(range(PARTITIONS)), "partitions listed by client groups describe")
    check_eq({p: r["topic"] for p, r in rows.items()}, {p: topic for p in range(PARTITIONS)}, "TOPIC column")
    check_eq({p: r["current"] for p, r in rows.items()}, committed, "CURRENT-OFFSET column")
    check_eq({p: r["end"] for p, r in rows.items()}, ends, "LOG-END-OFFSET column")
    check_eq({p: r["lag"] for p, r in rows.items()}, want_lag, "LAG column (= produced - consumed)")

    o3, o2 = members_owning(m3, topic), members_owning(d2["members"], topic)
    check_eq(o3, o2, "partition owners: kafka-python 3.x vs 2.0.2 describe")
    ours = {p: (r["member"], r["client_id"], r["host"]) for p, r in rows.items() if r["member"] != "-"}
    check_eq(ours, o3, "CONSUMER-ID/CLIENT-ID/HOST columns vs kafka-python's describe")
    check_eq({p: o[0] for p, o in o3.items()}, owners, "partition owners (describe) vs members' own reports")
    check(all(o[2] == "/127.0.0.1" for o in o3.values()), f"member hosts: {set(o[2] for o in o3.values())}")
    check_eq(sorted(m["member_id"] for m in m3), sorted(set(owners.values())), "members in describe")
    check_eq(sorted(m["member_id"] for m in d2["members"]), sorted(m["member_id"] for m in m3),
             "members: kafka-python 2.0.2 vs 3.x describe")
    # --members and --state against kafka-python 3.x's DescribeGroups
    check_eq(sorted(our_describe_view(bootstrap, group, "--members")),
             sorted([group, m["member_id"], m["client_host"], m["client_id"], str(len(m["assignment"].get(topic, [])))]
                    for m in m3), "client groups describe --members rows")
    host, port = c.split_addr(bootstrap)
    [st] = our_describe_view(bootstrap, group, "--state")
    check_eq(st, [group, f"{host}:{port}", f"({broker_id})", desc3["protocol_data"] or "-", state, str(len(m3))],
             "client groups describe --state row")
    check_eq(desc3["protocol_data"] or "", d2["protocol"] or "", "assignment protocol: kafka-python 3.x vs 2.0.2")
    if state == "Empty":
        check_eq(err.strip(), f"Consumer group '{group}' has no active members.", "client groups describe stderr")
        check(all(r["member"] == r["host"] == r["client_id"] == "-" for r in rows.values()), "owner columns '-'")
    else:
        check_eq(err.strip(), "", "client groups describe stderr")
    return (f"committed {sum(committed.values())}, log end {sum(ends.values())}, lag {sum(want_lag.values())} "
            f"on {PARTITIONS} partitions: client groups describe = kafka-python 3.x = 2.0.2")


def check_exactly_once(records, expected):
    """records: what members reported; expected: what was produced (partition, offset, key, value)."""
    seen = {}
    for r in records:
        check((r[0], r[1]) not in seen, f"record {r[0]}@{r[1]} delivered twice")
        seen[(r[0], r[1])] = r
    check_eq(len(records), len(expected), "records delivered across the group")
    check_eq(sorted(records), sorted(expected), "records delivered (partition, offset, key, value)")


def wait_consumed(members, expected, what):
    def done():
        for m in members:
            check(m.proc.poll() is None, f"member {m.name} exited (status {m.proc.returncode})")
            check_eq(m.errors, [], f"errors reported by member {m.name}")
        return sum(len(m.snapshot()[2]) for m in members) >= len(expected)
    c.wait_until(done, 30, what)
    say(f"{what}: {len(expected)} records reported")
    time.sleep(0.7)  # anything delivered twice would show up now


def wait_committed(bootstrap, topic, group, want, what):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-groups-admin", request_timeout_ms=15000)

    def done():
        got = {tp.partition: om.offset for tp, om in admin.list_group_offsets(group)[group].items() if tp.topic == topic}
        return got if got == want else None
    try:
        c.wait_until(done, 20, what, interval=0.2)
        say(f"{what}: committed offsets = {[want[p] for p in range(PARTITIONS)]}")
    finally:
        admin.close()


def check_kp2_join_log(m):
    """kafka-python 2.0.2 sends JoinGroup v2, which predates MEMBER_ID_REQUIRED (v4): every answer
    must carry error 0 and a member id at once."""
    sent = [ln for ln in m.logs if ln.startswith("Sending JoinGroup (")]
    answers = [ln for ln in m.logs if re.search(r"Response \d+ \([^)]*\): JoinGroupResponse_v", ln)]
    check(sent, f"member {m.name}: no JoinGroup in kafka-python's log")
    check(all("JoinGroupRequest_v2(" in ln for ln in sent), f"member {m.name}: JoinGroup versions sent: {[ln[:60] for ln in sent]}")
    check_eq(len(answers), len(sent), f"member {m.name}: JoinGroup answers vs requests")
    codes = [int(re.search(r"error_code=(-?\d+)", ln).group(1)) for ln in answers]
    check_eq(codes, [0] * len(sent), f"member {m.name}: JoinGroup v2 error codes (79 = MEMBER_ID_REQUIRED)")
    check(not any("MemberIdRequired" in ln or "Unexpected error in join group" in ln for ln in m.logs),
          f"member {m.name}: kafka-python logged a JoinGroup error")
    return len(sent)


def check_kp3_join_log(m):
    """kafka-python 3.x sends JoinGroup v4+ with an empty member id: the first answer must be
    MEMBER_ID_REQUIRED (79) carrying the member id it then joins with, and that join succeeds."""
    answers = [re.search(r"JoinGroupResponse\(version=(\d+), .*?error_code=(-?\d+), .*?member_id='([^']*)'", ln)
               for ln in m.logs if ln.startswith("Received JoinGroup response:")]
    check(answers and all(answers), f"member {m.name}: no parsable JoinGroup answer in kafka-python's log")
    check(len(answers) >= 2, f"member {m.name}: {len(answers)} JoinGroup answer(s), expected MEMBER_ID_REQUIRED and a join")
    (v0, e0, id0), (_, e1, id1) = answers[0].groups(), answers[1].groups()
    check(int(v0) >= 4, f"member {m.name}: first JoinGroup version {v0} (MEMBER_ID_REQUIRED needs v4+)")
    check_eq((int(e0), int(e1), id1), (79, 0, id0),
             f"member {m.name}: first two JoinGroup answers (error, then error and member id of the second)")
    check_eq(id0, m.member_id, f"member {m.name}: member id from MEMBER_ID_REQUIRED vs the one it joined with")
    return int(v0)


def _verify_members(client, members):
    """Member ids are client.id + '-' + UUID as Kafka makes them; returns a note on JoinGroup."""
    for m in members:
        check(m.member_id and m.member_id.startswith(m.client_id + "-"),
              f"member id {m.member_id!r} is not client.id + '-' + UUID ({m.client_id})")
    notes = []
    kp2 = [m for m in members if m.client == "kafka-python-2.0.2"]
    if kp2:
        joins = sum(check_kp2_join_log(m) for m in kp2)
        notes.append(f"kafka-python 2.0.2: {joins} JoinGroup v2, all answered with error 0 (no MEMBER_ID_REQUIRED)")
    kp3 = [m for m in members if m.client == "kafka-python"]
    if kp3:
        versions = {check_kp3_join_log(m) for m in kp3}
        notes.append(f"kafka-python: JoinGroup v{'/'.join(map(str, sorted(versions)))}, MEMBER_ID_REQUIRED first, "
                     "then joined with that id")
    return "".join("; " + n for n in notes)


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------

def _stable_two(client, bootstrap, topic, group, what):
    members = start_members(client, bootstrap, topic, group, ["a", "b"])
    split = wait_split(members, what)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-groups-admin", request_timeout_ms=15000)
    d = c.wait_until(lambda: (lambda g: g if g["group_state"] == "Stable" else None)(admin.describe_groups([group])[group]),
                     10, "group Stable in describe_groups")
    admin.close()
    protocol = d["protocol_data"]
    want = expected_split(protocol, list(split))
    check_eq(split, want, f"partitions of each member under {protocol}")
    return members, split, protocol


def split(bootstrap, topic, args):
    client, group = args.client, group_name(topic)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="interop-groups-admin", request_timeout_ms=15000)
    res = admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}})
    check_eq([(t["name"], t["error_code"]) for t in res["topics"]], [(topic, 0)], "CreateTopics result")
    admin.wait_for_topics([topic], timeout_ms=10000)
    admin.close()
    members, split_, protocol = _stable_two(client, bootstrap, topic, group, "a disjoint split of 6 partitions")
    try:
        for m in members:
            check_eq(m.snapshot()[2], [], f"records delivered to {m.name} before anything was produced")
        produced = produce_wave(bootstrap, topic, client, "A")
        wait_consumed(members, produced, "wave A consumed")
        records = []
        for m in members:
            mine = m.snapshot()[2]
            check(all(r[0] in split_[m.member_id] for r in mine),
                  f"member {m.name} got records of partitions it does not own: {sorted({r[0] for r in mine})}")
            records += mine
        check_exactly_once(records, produced)
        ends = counts(WAVES["A"])
        wait_committed(bootstrap, topic, group, ends, "wave A committed")
        owners = {p: mid for mid, ps in split_.items() for p in ps}
        readers = check_readers(bootstrap, topic, group, ends, ends, owners, "Stable")
        join_note = _verify_members(client, members)
    except BaseException:
        for m in members:
            m.kill()
        raise
    for m in members:
        m.leave()
    split_desc = ", ".join(f"{m.name} ({m.client}) {sorted(split_[m.member_id])}"
                           for m in sorted(members, key=lambda m: m.member_id))
    return (f"{protocol} split by sorted member id: {split_desc}; {len(produced)} records consumed "
            f"exactly once and committed; {readers}{join_note}")


def rejoin_leave(bootstrap, topic, args):
    client, group = args.client, group_name(topic)
    members, split_, protocol = _stable_two(client, bootstrap, topic, group, "two new members split the partitions")
    a, b = members
    try:
        time.sleep(1.0)
        for m in members:
            check_eq(m.snapshot()[2], [], f"records delivered to {m.name} although all were committed")
        a.leave()
        wait_single(b, "the remaining member assigned all 6 partitions")
        check(b.snapshot()[0] in split_, f"member {b.name} rejoined under a new member id {b.snapshot()[0]}")
        produced = produce_wave(bootstrap, topic, client, "B")
        wait_consumed([b], produced, "wave B consumed by the remaining member")
        check_exactly_once(b.snapshot()[2], produced)
        check_eq(a.snapshot()[2], [], "records delivered to the member that left")
        ends = add(counts(WAVES["A"]), counts(WAVES["B"]))
        wait_committed(bootstrap, topic, group, ends, "wave B committed")
        readers = check_readers(bootstrap, topic, group, ends, ends, {p: b.member_id for p in range(PARTITIONS)}, "Stable")
        _verify_members(client, members)
    except BaseException:
        for m in members:
            m.kill()
        raise
    b.leave()
    return (f"two new members resumed at the committed offsets (nothing delivered again); after "
            f"{a.name} ({a.client}) left, {b.name} ({b.client}) had {b.assignments[-1]} and consumed the "
            f"{len(produced)} new records exactly once; {readers}")


def lag(bootstrap, topic, args):
    group = group_name(topic)
    committed = add(counts(WAVES["A"]), counts(WAVES["B"]))
    produce_wave(bootstrap, topic, args.client, "C")
    ends = add(committed, counts(WAVES["C"]))
    readers = check_readers(bootstrap, topic, group, committed, ends, {}, "Empty")
    lag_ = {p: ends[p] - committed[p] for p in range(PARTITIONS)}
    check_eq(lag_, counts(WAVES["C"]), "lag = records of wave C per partition")
    return f"no members (Empty); lag per partition {[lag_[p] for p in range(PARTITIONS)]}: {readers}"


def client_arg(value):
    parts = value.split("+")
    if len(parts) > 2 or any(p not in CLIENTS for p in parts):
        raise ValueError(value)
    if len(parts) == 2 and "kafkajs" in parts:
        # kafkajs offers only RoundRobinAssigner, the others range/roundrobin under other names:
        # such a group fails with INCONSISTENT_GROUP_PROTOCOL, which is Kafka's behaviour too
        raise ValueError(value)
    return value


if __name__ == "__main__":
    c.run({"split": split, "rejoin-leave": rejoin_leave, "lag": lag}, __doc__,
          add_args=lambda ap: ap.add_argument(
              "--client", required=True, type=client_arg,
              help=f"one of {', '.join(CLIENTS)}, or X+Y for a group of one member of each"))
