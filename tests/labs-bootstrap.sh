#!/usr/bin/env bash
# Every lab against the broker binary with Kafka's own group default, a 3 s
# group.initial.rebalance.delay.ms, through `--bootstrap` as against any Kafka cluster: each must
# reach its verdict (exit 0) with the figures of its embedded run.
#
# Figures that differ on a cluster by design are left out of the comparison, each for a reason:
# - names: on a cluster every topic and group carries the run's id (`orders-<id>`), so runs on a
#   shared cluster never collide; the id is taken off before comparing, and `target` says where
#   the lab ran.
# - idempotence `broker_side_*`: that run drops acknowledgements through the embedded broker's
#   fault injection, which a cluster does not offer; the lab skips it there.
# - rebalance: its durations (`*_ms*`, the `incident` sentences) and what follows from them
#   (`resumptions_checked`): on a cluster time is real, so the lab runs its scenarios on
#   Timing::REAL (6 s sessions, a 2 s max.poll.interval or more: it and the stall are fitted to
#   the cluster's rebalance, measured first) instead of Kafka's defaults on the paused
#   clock; the counts that follow from data and max.poll.records are compared. In its
#   transactional run, `eos.output_held_by_open_transaction` too: how many committed records
#   wait behind the stalled member's open transaction depends on how far the other members get
#   while it stalls, which real time decides.
# - routing: nothing, but its embedded run is given `--nodes 1`, the size of this script's
#   cluster: on one node no leader can move, so both runs skip the phases that need a move with
#   the same reason (tests/routing.rs compares every figure against `broker --nodes 3`).
# - hot-tenant and rehash: nothing. Their wall-clock timings (run seconds, lookup costs) are in
#   each report's `measured` object, which is never compared; `figures` is a function of the
#   seed on any broker (issue 17).
#
# Usage: bash tests/labs-bootstrap.sh   (from anywhere; builds what it needs in release mode)
set -euo pipefail
cd "$(dirname "$0")/.."

# LABS_BIN_DIR=DIR: use the broker and workshop binaries in DIR as they are (no build).
if [[ -n ${LABS_BIN_DIR:-} ]]; then
    bin=$LABS_BIN_DIR
else
    cargo build --release --quiet -p broker -p workshop
    target_dir=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
    bin="$target_dir/release"
fi

work=$(mktemp -d)
broker_pid=
cleanup() {
    if [[ -n $broker_pid ]]; then
        kill "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

"$bin/broker" --listen 127.0.0.1:0 --group-initial-rebalance-delay-ms 3000 \
    >"$work/broker.out" 2>"$work/broker.err" &
broker_pid=$!
for _ in $(seq 100); do
    [[ -s $work/broker.out ]] && break
    sleep 0.1
done
addr=$(awk '{print $NF; exit}' "$work/broker.out")
[[ -n $addr ]] || { cat "$work/broker.err" >&2; echo "labs-bootstrap: the broker did not start" >&2; exit 1; }
echo "labs-bootstrap: broker at $addr, group.initial.rebalance.delay.ms=3000"

# Every lab as listed, and hot-tenant's step model too.
runs=()
# One lab per line of `workshop list`; a summary too long for 100 columns goes on under itself,
# indented, and is no lab.
while IFS= read -r line; do
    [[ -z $line || $line == [[:space:]]* ]] && continue
    runs+=("${line%% *}")
done < <("$bin/workshop" list)
runs+=("hot-tenant --steps")

passed=0
failed=0
for run in "${runs[@]}"; do
    read -r -a argv <<<"$run"
    name=${run// /}
    # The embedded run has as many nodes as this script's cluster (see the header).
    embedded_size=()
    [[ $run == routing ]] && embedded_size=(--nodes 1)
    # The bounds only stop a hang: the embedded run takes seconds on the paused clock, the
    # cluster run about a minute at most.
    if ! timeout 600 "$bin/workshop" "${argv[@]}" "${embedded_size[@]}" --json \
        >"$work/$name.embedded.json" 2>"$work/$name.embedded.err"; then
        tail -5 "$work/$name.embedded.err" >&2
        echo "FAIL $run: the embedded run did not reach its verdict"
        failed=$((failed + 1))
        continue
    fi
    started=$SECONDS
    if ! timeout 900 "$bin/workshop" "${argv[@]}" --json --bootstrap "$addr" \
        >"$work/$name.cluster.json" 2>"$work/$name.cluster.err"; then
        tail -5 "$work/$name.cluster.err" >&2
        echo "FAIL $run: with --bootstrap it did not reach its verdict"
        failed=$((failed + 1))
        continue
    fi
    if python3 - "$run" "$work/$name.embedded.json" "$work/$name.cluster.json" <<'PY'; then
import json
import re
import sys

lab, embedded_path, cluster_path = sys.argv[1:]

# Figures a cluster run may differ in, by lab, as dotted paths (list indexes as [N]); a regex
# matches the whole path. The reasons are in the header of this script.
DIFFER_BY_DESIGN = {
    "idempotence": [r"broker_side_.*"],
    "rebalance": [
        r".*_ms(_.*)?",
        r".*\.incident",
        r".*resumptions_checked",
        r"eos\.output_held_by_open_transaction",
    ],
}
ALWAYS = [r"target"]


def flat(value, path=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from flat(inner, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from flat(inner, f"{path}[{i}]")
    else:
        yield path, value


def load(path):
    with open(path) as f:
        doc = json.load(f)
    if doc.get("shown") is not True:
        sys.exit(f"{path}: the lab did not show its phenomenon")
    return dict(flat(doc["figures"]))


embedded, cluster = load(embedded_path), load(cluster_path)
# The run id: what a cluster's topic name adds to the embedded one ("-<id>").
run_id = None
for key, name in embedded.items():
    other = cluster.get(key)
    if isinstance(name, str) and isinstance(other, str) and other.startswith(name + "-"):
        run_id = other[len(name):]
        break
if run_id:
    cluster = {k: v.replace(run_id, "") if isinstance(v, str) else v for k, v in cluster.items()}
skip = [re.compile(p) for p in ALWAYS + DIFFER_BY_DESIGN.get(lab, [])]
compared = differ = 0
for key in sorted(set(embedded) | set(cluster)):
    if any(p.fullmatch(key) for p in skip):
        continue
    compared += 1
    if embedded.get(key) != cluster.get(key):
        differ += 1
        print(f"  {key}: embedded {embedded.get(key)!r}, cluster {cluster.get(key)!r}")
if differ:
    sys.exit(f"{lab}: {differ} of {compared} figures differ")
print(f"PASS {lab}: verdict reached, {compared} figures as embedded")
PY
        echo "  ($run with --bootstrap took $((SECONDS - started)) s)"
        passed=$((passed + 1))
    else
        echo "FAIL $run: figures differ from the embedded run"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
