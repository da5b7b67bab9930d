#!/bin/sh
# Runs Mandate's task lifecycle and Extism's equivalent in interleaved
# rounds and prints the ratios (BENCHMARKS.md, "Task lifecycle"). Both of
# Mandate's engines by default (wasmtime needs cgo); ENGINES=wazero for the
# pure-Go one alone. Arguments go to the program (-rounds, -go-tasks,
# -tiny-tasks, -workers, -idle, -cpuprofile; -h lists them).
set -eu
cd "$(dirname "$0")"
export GOWORK=off # its own module, outside the repository's workspace
engines=${ENGINES:-wazero,wasmtime}
tags=
case ",$engines," in *,wasmtime,*) tags="-tags wasmtime" ;; esac
go build $tags -o "${TMPDIR:-/tmp}/mandate-extism-bench" .
exec "${TMPDIR:-/tmp}/mandate-extism-bench" -engines "$engines" "$@"
