#!/usr/bin/env bash
# Kept so that documented commands keep working: the script is scripts/run-main.sh.
exec "$(dirname "$0")/../scripts/run-main.sh" "$@"
