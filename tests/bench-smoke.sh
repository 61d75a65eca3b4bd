#!/usr/bin/env bash
# CI smoke for `workshop bench --quick`: proves that every case still runs and prints valid JSON
# lines. It asserts no speed: the machine is shared and noisy, so a timed gate would fail at
# random (performance.md C.4). Figures are read by people, side by side with their ceilings.
#
# Usage: bash tests/bench-smoke.sh   (from anywhere; builds what it needs in release mode)
set -euo pipefail
cd "$(dirname "$0")/.."

# The bench starts the broker binary, so both must be built; `cargo run -p workshop` alone would
# not build `broker`.
cargo build --release --quiet -p broker -p workshop

out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# --quick takes well under a minute; the timeout only bounds a hung run.
if ! timeout 300 cargo run --release --quiet -p workshop -- bench --quick >"$out" 2>"$err"; then
    cat "$err" >&2
    echo "bench-smoke: workshop bench --quick failed" >&2
    exit 1
fi

python3 - "$out" <<'PY'
import json
import sys

expected = {"raw", "produce", "consume", "e2e", "rebalance", "startup", "lag"}
seen, problems = set(), []
with open(sys.argv[1]) as f:
    lines = [line for line in f if line.strip()]
for n, line in enumerate(lines, 1):
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as e:
        problems.append(f"line {n} is not JSON ({e}): {line[:80]!r}")
        continue
    if not isinstance(doc, dict) or "bench" not in doc or "ratio" not in doc:
        problems.append(f"line {n} lacks bench or ratio: {line[:80]!r}")
        continue
    seen.add(doc["bench"])
missing = expected - seen
if missing:
    problems.append("no line for: " + ", ".join(sorted(missing)))
for p in problems:
    print("bench-smoke: " + p, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"bench-smoke: {len(lines)} JSON lines from {len(seen)} cases: ok")
PY
