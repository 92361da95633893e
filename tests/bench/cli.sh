#!/usr/bin/env bash
# Every program of the suite answers the shared options the same way
# (benchmarks/common/cli.hpp): --help prints its own usage first (not
# Kokkos's option list) and exits 0; --version prints the program and its
# git hash; --kokkos-help prints Kokkos's options; an unknown option is an
# error that names it (exit 2).
#   cli.sh GIT_HASH_HEADER PROGRAM...   (the build's generated qsgd_git_hash.hpp)
set -u
hash="$(sed -n 's/.*git_hash = "\([^"]*\)".*/\1/p' "$1")"; shift
[ -n "$hash" ] || { echo "FAIL: no git hash in the header"; exit 1; }
[ "$#" -gt 0 ] || { echo "FAIL: no programs given"; exit 1; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
for p in "$@"; do
  name="$(basename "$p")"
  out="$("$p" --help 2>/dev/null)"; rc=$?
  [ "$rc" -eq 0 ] || bad "$name --help exited $rc"
  first="$(printf '%s\n' "$out" | head -n 1)"
  case "$first" in *[Uu]sage*|"$name"*) ;; *) bad "$name --help starts with '$first', not its usage" ;; esac
  printf '%s\n' "$out" | grep -q "Kokkos command line arguments" && bad "$name --help prints Kokkos's options"
  printf '%s\n' "$out" | grep -q -- "--kokkos-help" || bad "$name --help does not mention --kokkos-help"
  out="$("$p" --version 2>&1)"; rc=$?
  [ "$rc" -eq 0 ] || bad "$name --version exited $rc"
  case "$out" in "$name $hash"*) ;; *) bad "$name --version printed '$out', not '$name $hash ...'" ;; esac
  out="$("$p" --kokkos-help 2>&1)"; rc=$?
  [ "$rc" -eq 0 ] || bad "$name --kokkos-help exited $rc"
  printf '%s\n' "$out" | grep -q "Kokkos command line arguments" || bad "$name --kokkos-help does not print Kokkos's options"
  # qsgd-algorithms takes its command first.
  args=(--no-such-option)
  [ "$name" = qsgd-algorithms ] && args=(convex --no-such-option)
  err="$("$p" "${args[@]}" 2>&1 >/dev/null)"; rc=$?
  [ "$rc" -eq 2 ] || bad "$name --no-such-option exited $rc, not 2"
  printf '%s\n' "$err" | grep -q -- "--no-such-option" || bad "$name's error does not name the option: $err"
done
[ "$fail" -eq 0 ] && echo "PASS: $# programs"
exit "$fail"
