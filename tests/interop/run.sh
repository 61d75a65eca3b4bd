#!/usr/bin/env bash
# Interop proof: real Kafka clients (kcat from Debian, kafka-python and confluent-kafka from PyPI)
# against our broker binary. Installs what it needs (idempotently), builds the broker, starts it on
# 127.0.0.1:0, runs every scenario, prints PASS/FAIL per scenario and "N passed, M failed".
# See README.md beside this file.
#
# Environment knobs (all optional):
#   INTEROP_BOOTSTRAP=HOST:PORT  use a broker that is already running (no build, no start/stop)
#   INTEROP_BROKER_BIN=PATH      broker binary to start (default: <target>/release/broker, built here)
#   INTEROP_SKIP_BUILD=1         do not run cargo build
#   INTEROP_ONLY=REGEX           run only the scenarios whose name matches (bash regex)
#   INTEROP_DEBUG=1              kcat -d protocol,broker,..., librdkafka debug, kafka-python DEBUG logs
#   INTEROP_IDEMPOTENCE=0        plain (non-idempotent) producers; idempotent by default
#   INTEROP_SCENARIO_TIMEOUT=S   per-scenario limit in seconds (default 120)
#   RUST_LOG                     broker log filter (default info); broker logs go to .logs/broker.stderr
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
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
say "$(kcat -V 2>&1 | grep -m1 '^Version')"
say "$("$PYTHON" -c 'import sys, importlib.metadata as m, confluent_kafka as ck
print("python %s, kafka-python %s, confluent-kafka %s (librdkafka %s)" % (sys.version.split()[0],
      m.version("kafka-python"), m.version("confluent-kafka"), ck.libversion()[0]))')"

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

if [[ -n "${INTEROP_BOOTSTRAP:-}" ]]; then
    ADDR="$INTEROP_BOOTSTRAP"
    say "using the broker already running at $ADDR"
else
    TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
    BROKER="${INTEROP_BROKER_BIN:-$TARGET_DIR/release/broker}"
    if [[ -z "${INTEROP_BROKER_BIN:-}" && "${INTEROP_SKIP_BUILD:-0}" != 1 ]]; then
        say "cargo build --release -p broker"
        (cd "$ROOT" && cargo build --release -p broker)
    fi
    [[ -x "$BROKER" ]] || { say "no broker binary at $BROKER"; exit 1; }
    NO_COLOR=1 RUST_LOG="${RUST_LOG:-info}" "$BROKER" --listen 127.0.0.1:0 \
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
scenario() {  # scenario NAME COMMAND...
    local name="$1"
    shift
    if [[ -n "$ONLY" && ! "$name" =~ $ONLY ]]; then return 0; fi
    local logf="$LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log"
    local t0=$SECONDS rc=0
    if [[ -n "$BROKER_PID" ]] && ! kill -0 "$BROKER_PID" 2>/dev/null; then
        echo "FAIL: the broker (pid $BROKER_PID) is no longer running" >"$logf"
        rc=99
    else
        (cd "$HERE" && timeout -k 5 "$SCENARIO_TIMEOUT" "$@") </dev/null >"$logf" 2>&1 || rc=$?
    fi
    local took=$((SECONDS - t0))
    if [[ $rc -eq 0 ]]; then
        PASSED=$((PASSED + 1))
        printf 'PASS  %-40s %3ss  %s\n' "$name" "$took" "$(grep -m1 '^ok ' "$logf" | sed 's/^ok [^:]*: //')"
    else
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$name")
        local why="exit code $rc"
        [[ $rc -eq 124 ]] && why="timed out after ${SCENARIO_TIMEOUT}s"
        [[ $rc -eq 99 ]] && why="broker gone"
        printf 'FAIL  %-40s %3ss  (%s; log: %s)\n' "$name" "$took" "$why" "$logf"
        # the scenario's own verdict first, then the end of its log without librdkafka's noise
        grep -m1 '^FAIL' "$logf" | sed 's/^/      > /' || true
        grep -v -e '^%[0-7]|' -e '^FAIL' "$logf" | tail -n 15 | sed 's/^/      | /' || true
    fi
}

RUN_ID="$(date +%s)"
# the partitioner oracle itself, before anything relies on it
scenario "murmur2: Kafka/librdkafka/kafkajs vectors" "$PYTHON" kafka_murmur2.py

for client in kcat kafka-python confluent-kafka; do
    case "$client" in
        kcat) script=kcat_interop.py steps="create-topic metadata produce-keyed consume-eof read-back end-offsets grow-24 timestamp-lookup compression" ;;
        kafka-python) script=kafka_python_interop.py steps="create-topic metadata produce-keyed read-back end-offsets grow-24 timestamp-lookup compression" ;;
        confluent-kafka) script=confluent_interop.py steps="create-topic metadata produce-keyed read-back end-offsets grow-24 timestamp-lookup compression" ;;
    esac
    topic="interop-${client}-${RUN_ID}"
    for step in $steps; do
        scenario "$client: $step" "$PYTHON" "$script" --bootstrap "$ADDR" --topic "$topic" "$step"
    done
done

# Lost acknowledgements: confluent-kafka and kafka-python, idempotent, through a broker of its own
# that drops a seeded share of produce answers after the append; each record must be stored once.
# (It needs our broker's fault injection, so not with INTEROP_BOOTSTRAP.)
if [[ -n "${BROKER:-}" ]]; then
    scenario "idempotence: acks dropped, stored once" "$PYTHON" idempotence_interop.py --broker-bin "$BROKER"
fi

sigterm_check() {
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
        printf 'PASS  %-40s %3ss  %s\n' "broker: stops cleanly on SIGTERM" "$((SECONDS - t0))" "$(sed -n 's/^ok [^:]*: //p' "$logf")"
    else
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("broker: stops cleanly on SIGTERM")
        printf 'FAIL  %-40s %3ss  (%s)\n' "broker: stops cleanly on SIGTERM" "$((SECONDS - t0))" "$(tail -n1 "$logf")"
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
