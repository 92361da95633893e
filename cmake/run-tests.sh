#!/usr/bin/env bash
# Kept so that documented commands keep working: the script is scripts/run-tests.sh.
exec "$(dirname "$0")/../scripts/run-tests.sh" "$@"
