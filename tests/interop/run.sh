#!/usr/bin/env bash
# Interop proof: real Kafka clients (kcat from Debian; kafka-python 3.x and 2.0.2 and
# confluent-kafka from PyPI; kafkajs 2.2.4 from npm) and our own `client` CLI against our broker
# binary. Installs what it needs (idempotently), builds the broker and the CLI, starts the broker on
# 127.0.0.1:0, runs every scenario, prints PASS/FAIL per scenario and "N passed, M failed".
# See README.md beside this file.
#
# Environment knobs (all optional):
#   INTEROP_BOOTSTRAP=HOST:PORT  use a broker that is already running (no broker build, start/stop)
#   INTEROP_BROKER_BIN=PATH      broker binary to start (default: <target>/release/broker, built here)
#   INTEROP_CLIENT_BIN=PATH      our CLI (default: <target>/release/client, built here)
#   INTEROP_SKIP_BUILD=1         do not run cargo build
#   INTEROP_KP2_PYTHON_BIN=PY    a Python 3.8-3.11 for the kafka-python 2.0.2 venv (.venv-kp2)
#   INTEROP_ONLY=REGEX           run only the scenarios whose name matches (bash regex)
#   INTEROP_DEBUG=1              kcat -d protocol,broker,..., librdkafka debug, kafka-python DEBUG logs
#   INTEROP_IDEMPOTENCE=0        plain (non-idempotent) producers; idempotent by default
#   INTEROP_SCENARIO_TIMEOUT=S   per-scenario limit in seconds (default 120)
#   RUST_LOG                     broker log filter (default info); broker logs go to .logs/broker.stderr
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
VENV_KP2="$HERE/.venv-kp2"
KAFKAJS_DIR="$HERE/kafkajs"
LOGS="$HERE/.logs"
SCENARIO_TIMEOUT="${INTEROP_SCENARIO_TIMEOUT:-120}"
ONLY="${INTEROP_ONLY:-}"
START=$SECONDS

say() { printf '[interop] %s\n' "$*"; }

SUDO=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then SUDO=(sudo); fi

APT_UPDATED=0
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if [[ $APT_UPDATED -eq 0 ]]; then
        say "apt-get update"
        "${SUDO[@]}" apt-get update -qq
        APT_UPDATED=1
    fi
    say "apt-get install -y $*"
    "${SUDO[@]}" apt-get install -y -qq "$@" >/dev/null
}

# ---- 1. clients -----------------------------------------------------------------------------
if ! command -v kcat >/dev/null; then
    apt_install kcat
fi

venv_ok() {
    [[ -x "$VENV/bin/python" ]] &&
        "$VENV/bin/python" -c 'import kafka, confluent_kafka, snappy, lz4.frame, zstandard' 2>/dev/null
}
if ! venv_ok; then
    rm -rf "$VENV"
    PY="${INTEROP_PYTHON:-python3}"
    command -v "$PY" >/dev/null || { apt_install python3 python3-venv; PY=/usr/bin/python3; }
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
        # Debian's own python3 needs python3-venv for ensurepip
        rm -rf "$VENV"
        apt_install python3-venv
        /usr/bin/python3 -m venv "$VENV"
    fi
    say "pip install kafka-python[snappy,lz4,zstd] confluent-kafka into $VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade \
        "kafka-python[snappy,lz4,zstd]" confluent-kafka
    venv_ok || { say "the venv at $VENV cannot import the clients"; exit 1; }
fi
PYTHON="$VENV/bin/python"

# kafka-python 2.0.2 (consumer groups with JoinGroup v2, and its admin client) does not import on
# Python 3.12+: a venv of its own on a 3.8-3.11 interpreter (Debian 12's python3 is 3.11).
kp2_ok() {
    [[ -x "$VENV_KP2/bin/python" ]] && "$VENV_KP2/bin/python" -c '
import sys, kafka
assert sys.version_info[:2] <= (3, 11) and kafka.__version__ == "2.0.2"' 2>/dev/null
}
py_le_311() { "$1" -c 'import sys; sys.exit(not ((3, 8) <= sys.version_info[:2] <= (3, 11)))' 2>/dev/null; }
if ! kp2_ok; then
    rm -rf "$VENV_KP2"
    PY311=""
    for cand in ${INTEROP_KP2_PYTHON_BIN:-} python3.11 python3 /usr/bin/python3.11 /usr/bin/python3; do
        if command -v "$cand" >/dev/null && py_le_311 "$cand"; then PY311="$(command -v "$cand")"; break; fi
    done
    if [[ -z "$PY311" ]]; then
        apt_install python3.11 python3.11-venv
        PY311=/usr/bin/python3.11
    fi
    if ! "$PY311" -m venv "$VENV_KP2" 2>/dev/null; then
        rm -rf "$VENV_KP2"
        apt_install python3.11-venv
        "$PY311" -m venv "$VENV_KP2"
    fi
    say "pip install kafka-python==2.0.2 into $VENV_KP2 ($("$PY311" -V 2>&1))"
    "$VENV_KP2/bin/python" -m pip install -q --disable-pip-version-check "kafka-python==2.0.2"
    kp2_ok || { say "the venv at $VENV_KP2 cannot import kafka-python 2.0.2"; exit 1; }
fi

# kafkajs 2.2.4 from npm, pinned by kafkajs/package.json and package-lock.json (npm ci)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt_install nodejs npm
fi
kafkajs_ok() {
    (cd "$KAFKAJS_DIR" && node -e 'process.exit(require("kafkajs/package.json").version === "2.2.4" ? 0 : 1)') 2>/dev/null
}
if ! kafkajs_ok; then
    say "npm ci (kafkajs 2.2.4) in $KAFKAJS_DIR"
    (cd "$KAFKAJS_DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    kafkajs_ok || { say "kafkajs 2.2.4 is not importable from $KAFKAJS_DIR"; exit 1; }
fi

say "$(kcat -V 2>&1 | grep -m1 '^Version')"
say "$("$PYTHON" -c 'import sys, importlib.metadata as m, confluent_kafka as ck
print("python %s, kafka-python %s, confluent-kafka %s (librdkafka %s)" % (sys.version.split()[0],
      m.version("kafka-python"), m.version("confluent-kafka"), ck.libversion()[0]))')"
say "$("$VENV_KP2/bin/python" -c 'import sys, kafka; print("python %s, kafka-python %s" % (sys.version.split()[0], kafka.__version__))'), node $(node --version), kafkajs $(cd "$KAFKAJS_DIR" && node -p 'require("kafkajs/package.json").version')"

# ---- 2. broker --------------------------------------------------------------------------------
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log "$LOGS"/broker.stdout "$LOGS"/broker.stderr
BROKER_PID=""
cleanup() {
    if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -TERM "$BROKER_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$BROKER_PID" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$BROKER_PID" 2>/dev/null; then
            say "broker $BROKER_PID ignored SIGTERM for 10 s: SIGKILL"
            kill -KILL "$BROKER_PID" 2>/dev/null || true
        fi
        wait "$BROKER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
CRATES=()
[[ -z "${INTEROP_BOOTSTRAP:-}" && -z "${INTEROP_BROKER_BIN:-}" ]] && CRATES+=(-p broker)
[[ -z "${INTEROP_CLIENT_BIN:-}" ]] && CRATES+=(-p client)
if [[ ${#CRATES[@]} -gt 0 && "${INTEROP_SKIP_BUILD:-0}" != 1 ]]; then
    say "cargo build --release ${CRATES[*]}"
    (cd "$ROOT" && cargo build --release "${CRATES[@]}")
fi
export INTEROP_CLIENT_BIN="${INTEROP_CLIENT_BIN:-$TARGET_DIR/release/client}"
[[ -x "$INTEROP_CLIENT_BIN" ]] || { say "no client binary at $INTEROP_CLIENT_BIN"; exit 1; }

if [[ -n "${INTEROP_BOOTSTRAP:-}" ]]; then
    ADDR="$INTEROP_BOOTSTRAP"
    say "using the broker already running at $ADDR"
else
    BROKER="${INTEROP_BROKER_BIN:-$TARGET_DIR/release/broker}"
    [[ -x "$BROKER" ]] || { say "no broker binary at $BROKER"; exit 1; }
    # The log cleaner every 500 ms, so that the compaction scenario reads a cleaned topic.
    NO_COLOR=1 RUST_LOG="${RUST_LOG:-info}" "$BROKER" --listen 127.0.0.1:0 --log-cleaner-backoff-ms 500 \
        >"$LOGS/broker.stdout" 2>"$LOGS/broker.stderr" &
    BROKER_PID=$!
    ADDR=""
    for _ in $(seq 1 150); do  # 30 s
        if [[ $(wc -l <"$LOGS/broker.stdout") -ge 1 ]]; then
            ADDR="$(head -n1 "$LOGS/broker.stdout" | awk '{print $NF}')"
            break
        fi
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            say "the broker exited before printing its address; stderr:"
            tail -n 40 "$LOGS/broker.stderr"
            exit 1
        fi
        sleep 0.2
    done
    if [[ ! "$ADDR" =~ ^127\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+$ ]]; then
        say "no loopback HOST:PORT in the broker's first stdout line within 30 s: '$(head -n1 "$LOGS/broker.stdout")'"
        exit 1
    fi
    say "broker pid $BROKER_PID listening on $ADDR (logs: $LOGS/broker.stderr)"
fi

# ---- 3. scenarios -----------------------------------------------------------------------------
PASSED=0
FAILED=0
FAILED_NAMES=()
BROKER_GONE=""
broker_gone() {  # true (and a note in BROKER_GONE) once the broker we started has exited
    [[ -n "$BROKER_PID" ]] || return 1
    [[ -n "$BROKER_GONE" ]] && return 0
    kill -0 "$BROKER_PID" 2>/dev/null && return 1
    local rc=0
    wait "$BROKER_PID" 2>/dev/null || rc=$?
    if [[ $rc -eq 0 ]]; then
        BROKER_GONE="exited with status 0 on its own: it shuts down that way only on SIGTERM/SIGINT, which this script had not sent"
    elif [[ $rc -gt 128 ]]; then
        BROKER_GONE="killed by signal $((rc - 128))"
    else
        BROKER_GONE="exited with status $rc"
    fi
    BROKER_GONE="the broker (pid $BROKER_PID) $BROKER_GONE (noticed at $(date +%T))"
    say "$BROKER_GONE; last lines of $LOGS/broker.stderr:"
    tail -n 5 "$LOGS/broker.stderr" | sed 's/^/      | /'
    return 0
}
scenario() {  # scenario NAME COMMAND...
    local name="$1"
    shift
    if [[ -n "$ONLY" && ! "$name" =~ $ONLY ]]; then return 0; fi
    local logf="$LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log"
    local t0=$SECONDS rc=0
    if broker_gone; then
        echo "FAIL: $BROKER_GONE" >"$logf"
        rc=99
    else
        (cd "$HERE" && timeout -k 5 "$SCENARIO_TIMEOUT" "$@") </dev/null >"$logf" 2>&1 || rc=$?
    fi
    local took=$((SECONDS - t0))
    # a broker that died during the scenario is the first thing to say about its failure
    [[ $rc -ne 0 && $rc -ne 99 ]] && broker_gone && rc=98
    if [[ $rc -eq 0 ]]; then
        PASSED=$((PASSED + 1))
        printf 'PASS  %-46s %3ss  %s\n' "$name" "$took" "$(grep -m1 '^ok ' "$logf" | sed 's/^ok [^:]*: //')"
    else
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$name")
        local why="exit code $rc"
        [[ $rc -eq 124 ]] && why="timed out after ${SCENARIO_TIMEOUT}s"
        [[ $rc -eq 99 ]] && why="broker gone before it started"
        [[ $rc -eq 98 ]] && why="broker gone during it: $BROKER_GONE"
        printf 'FAIL  %-46s %3ss  (%s; log: %s)\n' "$name" "$took" "$why" "$logf"
        # the scenario's own verdict first, then the end of its log without librdkafka's noise
        grep -m1 '^FAIL' "$logf" | sed 's/^/      > /' || true
        grep -v -e '^%[0-7]|' -e '^FAIL' "$logf" | tail -n 15 | sed 's/^/      | /' || true
    fi
}

RUN_ID="$(date +%s)"
# the partitioner oracle itself, before anything relies on it
scenario "murmur2: Kafka/librdkafka/kafkajs vectors" "$PYTHON" kafka_murmur2.py

for client in kcat kafka-python confluent-kafka kafkajs "client CLI"; do
    case "$client" in
        kcat) script=kcat_interop.py steps="create-topic metadata produce-keyed consume-eof read-back end-offsets grow-24 timestamp-lookup compression" ;;
        kafka-python) script=kafka_python_interop.py steps="create-topic metadata produce-keyed read-back end-offsets grow-24 timestamp-lookup compression" ;;
        confluent-kafka) script=confluent_interop.py steps="create-topic metadata produce-keyed read-back end-offsets grow-24 timestamp-lookup compression" ;;
        kafkajs) script=kafkajs_interop.py steps="create-topic metadata produce-keyed read-back end-offsets grow-24 timestamp-lookup compression" ;;
        # issue 3: our CLI writes, kcat and kafka-python read; kcat and kafka-python write, our CLI reads
        "client CLI") script=cli_interop.py steps="create-topic produce-keyed read-by-kcat read-by-kafka-python compression kcat-to-client kcat-codecs-to-client kafka-python-to-client kafka-python-codecs-to-client" ;;
    esac
    topic="interop-${client// /-}-${RUN_ID}"
    for step in $steps; do
        scenario "$client: $step" "$PYTHON" "$script" --bootstrap "$ADDR" --topic "$topic" "$step"
    done
done

# Consumer groups (issue 4): two members of one client per group on a 6-partition topic (and one
# group of two clients, JoinGroup v2 beside v5); the steps build on the group's committed offsets.
# Checked against our `client groups describe` and the admin clients of kafka-python 3.x and 2.0.2.
for client in kafka-python kafka-python-2.0.2 confluent-kafka kcat kafkajs kafka-python-2.0.2+kcat; do
    topic="interop-groups-${client//[.+]/-}-${RUN_ID}"
    for step in split rejoin-leave lag; do
        scenario "groups $client: $step" "$PYTHON" groups_interop.py --bootstrap "$ADDR" --topic "$topic" --client "$client" "$step"
    done
done

# Transactions (confluent-kafka and kafkajs producers, read_committed consumers of both), topic
# configs through kafka-python's admin, confluent-kafka's delete_records, a compacted topic read
# after cleaning. kafkajs-reads-confluent reads what confluent-transactions wrote.
for step in confluent-transactions kafkajs-reads-confluent confluent-invalid-timeout \
    kafkajs-transactions kafka-python-configs confluent-delete-records compaction; do
    topic="interop-txn-$step-${RUN_ID}"
    [[ $step == kafkajs-reads-confluent ]] && topic="interop-txn-confluent-transactions-${RUN_ID}"
    scenario "transactions/configs: $step" "$PYTHON" txn_interop.py --bootstrap "$ADDR" --topic "$topic" "$step"
done

# Group offsets (issue 19): reset and deleted by our CLI, read back by kafka-python 3.x's and
# 2.0.2's admin clients; reset and deleted by kafka-python's admin, seen by our describe and wait.
for step in cli-reset-read-by-kafka-python kafka-python-reset-seen-by-cli; do
    scenario "offsets: $step" "$PYTHON" offsets_interop.py --bootstrap "$ADDR" --topic "interop-offsets-${step}-${RUN_ID}" "$step"
done

# Kafka's semantics where a client reads them (issue 35): group offsets deleted with their topic
# (confluent-kafka's group and admin, kafka-python's admin), read_committed lookups by time, a
# tombstone kept by its delete horizon, batches recompressed into their topic's compression.type.
for step in deleted-topic-offsets read-committed-by-time tombstone-horizon compression-type; do
    scenario "semantics: $step" "$PYTHON" semantics_interop.py --bootstrap "$ADDR" --topic "interop-semantics-${step}-${RUN_ID}" "$step"
done

# The README's "Testing your service against this broker" examples, as written: each starts a
# broker of its own (so not with INTEROP_BOOTSTRAP).
if [[ -n "${BROKER:-}" ]]; then
    scenario "readme: Python test" env BROKER="$BROKER" CLIENT="$INTEROP_CLIENT_BIN" "$PYTHON" readme_python_test.py
    scenario "readme: Node test" env BROKER="$BROKER" CLIENT="$INTEROP_CLIENT_BIN" node kafkajs/readme_node_test.js
fi

# Lost acknowledgements: confluent-kafka and kafka-python, idempotent, through a broker of its own
# that drops a seeded share of produce answers after the append; each record must be stored once.
# (It needs our broker's fault injection, so not with INTEROP_BOOTSTRAP.)
if [[ -n "${BROKER:-}" ]]; then
    scenario "idempotence: acks dropped, stored once" "$PYTHON" idempotence_interop.py --broker-bin "$BROKER"
fi

# Three nodes in one broker process of its own (issue 32): confluent-kafka, kafka-python and kafkajs
# produce and consume in a group while every partition's leader moves; 0 lost. (Not with
# INTEROP_BOOTSTRAP.) kafka-python 3.x also checks its positions with OffsetForLeaderEpoch after
# the move (without that API it retried the check for ever instead of fetching).
if [[ -n "${BROKER:-}" ]]; then
    for client in confluent-kafka kafka-python kafkajs; do
        scenario "cluster: $client across a leader move" "$PYTHON" cluster_interop.py --broker-bin "$BROKER" "$client"
    done
fi

sigterm_check() {
    if broker_gone; then
        echo "$BROKER_GONE, before this check sent SIGTERM"
        return 1
    fi
    kill -TERM "$BROKER_PID"
    for _ in $(seq 1 50); do
        kill -0 "$BROKER_PID" 2>/dev/null || break
        sleep 0.2
    done
    if kill -0 "$BROKER_PID" 2>/dev/null; then
        echo "still running 10 s after SIGTERM"
        return 1
    fi
    local rc=0
    wait "$BROKER_PID" || rc=$?
    BROKER_PID=""
    echo "exit status $rc after SIGTERM"
    [[ $rc -eq 0 ]] && echo "ok broker-sigterm: exited with status 0 within 10 s of SIGTERM"
    [[ $rc -eq 0 ]]
}
if [[ -n "$BROKER_PID" && ( -z "$ONLY" || "broker: stops cleanly on SIGTERM" =~ $ONLY ) ]]; then
    logf="$LOGS/broker_sigterm.log"
    t0=$SECONDS
    if sigterm_check >"$logf" 2>&1; then
        PASSED=$((PASSED + 1))
        printf 'PASS  %-46s %3ss  %s\n' "broker: stops cleanly on SIGTERM" "$((SECONDS - t0))" "$(sed -n 's/^ok [^:]*: //p' "$logf")"
    else
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("broker: stops cleanly on SIGTERM")
        printf 'FAIL  %-46s %3ss  (%s)\n' "broker: stops cleanly on SIGTERM" "$((SECONDS - t0))" "$(tail -n1 "$logf")"
    fi
fi

if [[ $FAILED -gt 0 ]]; then
    say "failed: ${FAILED_NAMES[*]}"
    if [[ -s "$LOGS/broker.stderr" ]]; then
        say "last lines of the broker's stderr ($LOGS/broker.stderr):"
        tail -n 20 "$LOGS/broker.stderr" | sed 's/^/      | /'
    fi
fi
say "took $((SECONDS - START)) s"
echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
