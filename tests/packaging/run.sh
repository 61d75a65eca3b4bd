#!/usr/bin/env bash
# Packaging proof: builds the Python wheel and the Node package from the release binaries (no
# second cargo build when they exist), installs each into a fresh venv / a fresh Node project and
# runs a small suite there that uses only the installed package: a confluent-kafka producer and
# consumer group, `groups wait`, `check order`, and a runner killed with SIGKILL that must leave no
# broker behind. Installs pytest and confluent-kafka from PyPI into the venv itself.
#
#   PACKAGING_BIN_DIR=DIR   where `broker` and `client` are (default: the release directory of
#                           CARGO_TARGET_DIR or target/, built here if missing)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN_DIR="${PACKAGING_BIN_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}/release}"
VERSION=0.1.0
say() { printf '[packaging] %s\n' "$*"; }

if [[ ! -x "$BIN_DIR/broker" || ! -x "$BIN_DIR/client" ]]; then
    say "cargo build --release -p broker -p client"
    (cd "$ROOT" && cargo build --release -p broker -p client)
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

say "wheel"
WHEEL="$(python3 "$ROOT/packaging/build_wheel.py" "$BIN_DIR" "$WORK/dist" "$VERSION")"
say "$(basename "$WHEEL"): $(du -h "$WHEEL" | cut -f1)"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --disable-pip-version-check "$WHEEL" pytest confluent-kafka
# Only the venv on the PATH, and the suite copied out of the repository: nothing but the
# installed package can provide the binaries.
cp "$HERE/test_installed.py" "$WORK/"
(cd "$WORK" && env PATH="$WORK/venv/bin:/usr/bin:/bin" "$WORK/venv/bin/pytest" -q \
    -p no:cacheprovider test_installed.py)

say "node package"
cp -r "$ROOT/packaging/node" "$WORK/node-package"
mkdir "$WORK/node-package/bin"
for binary in broker client; do
    strip -o "$WORK/node-package/bin/$binary" "$BIN_DIR/$binary"
done
(cd "$WORK/node-package" && npm pack --silent --pack-destination "$WORK/dist" >/dev/null)
TARBALL="$WORK/dist/partitioned-log-broker-$VERSION.tgz"
say "$(basename "$TARBALL"): $(du -h "$TARBALL" | cut -f1)"
mkdir "$WORK/node-project"
cp "$HERE/installed_node_test.js" "$WORK/node-project/"
(cd "$WORK/node-project" && npm init -y >/dev/null &&
    npm install --silent --no-audit --no-fund "$TARBALL" &&
    env PATH="/usr/bin:/bin" node --test installed_node_test.js)
say "ok: the wheel and the Node package each passed with only the installed package"
