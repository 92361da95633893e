#!/usr/bin/env bash
# The suite's main job on its embedded default: installs what is missing,
# builds the optimized preset and runs the codec report (bits per dimension,
# entropy floor, variance blow-up for every codec on the built-in inputs).
# Extra arguments go to the report (e.g. --json, --n 65536).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cmake/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target qsgd-codec-report
exec build/release/benchmarks/qsgd-codec-report "$@"
