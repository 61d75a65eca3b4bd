#!/usr/bin/env bash
# The room view and the playground in a real headless Chromium (Debian's `chromium`), driven by
# npm's playwright-core: installs both if missing, builds the workshop binary, runs
# room.test.mjs, and leaves its screenshots in tests/browser/artifacts/.
#
#   bash tests/browser/run.sh                the test (CI runs it)
#   bash tests/browser/run.sh bench [SECS]   the benchmark instead: 64 partitions updated 4 times
#                                            a second, on a release build; prints JSON
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
say() { printf '[browser] %s\n' "$*"; }

SUDO=()
if [[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null; then SUDO=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [[ ${#missing[@]} -gt 0 ]]; then
    say "apt-get install -y ${missing[*]}"
    "${SUDO[@]}" apt-get update -qq
    "${SUDO[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [[ ! -f "$HERE/node_modules/playwright-core/package.json" ]]; then
    say "npm ci (playwright-core, without its browser downloads)"
    (cd "$HERE" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
fi

MODE="${1:-test}"
case "$MODE" in
    test) PROFILE=debug; BUILD=() ;;
    bench) PROFILE=release; BUILD=(--release) ;;
    *) echo "usage: $0 [test | bench [SECONDS]]" >&2; exit 2 ;;
esac
say "cargo build ${BUILD[*]} -p workshop --bin workshop"
(cd "$ROOT" && cargo build -q "${BUILD[@]}" -p workshop --bin workshop)

say "chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}'), playwright-core $(node -p "require('$HERE/node_modules/playwright-core/package.json').version")"
cd "$HERE"
mkdir -p artifacts
if [[ $MODE == bench ]]; then
    node bench.mjs "$TARGET/$PROFILE/workshop" "${2:-30}"
    exit
fi
node room.test.mjs "$TARGET/$PROFILE/workshop" "$HERE/artifacts"
say "screenshots: $(cd "$HERE/artifacts" && ls ./*.png | tr '\n' ' ')"
