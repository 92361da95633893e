#!/usr/bin/env bash
# Installs the build into a scratch prefix, then configures, builds and runs
# tests/install/consumer against it with find_package(qsgd): the installed
# headers, targets and package configuration are what a user's project gets.
#   install_test.sh BUILD_DIR CXX_COMPILER [CMAKE_BUILD_TYPE]
set -euo pipefail
build="$1" cxx="$2" type="${3:-Release}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/qsgd-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" ||
  { cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
cmake -S "$here/consumer" -B "$work/build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE="$type" \
  -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; echo "FAIL: find_package(qsgd) against the installed prefix"; exit 1; }
cmake --build "$work/build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; echo "FAIL: building the consumer"; exit 1; }
"$work/build/qsgd-consumer"
