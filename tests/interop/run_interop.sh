#!/usr/bin/env bash
# K4: a varsync checkpoint read by Python's safetensors, and a file written by
# Python's safetensors restored by varsync. Exit 77: skipped (no venv / PyPI).
# Usage: run_interop.sh SOURCE_DIR CHECKPOINT_INTEROP_BINARY VENV_DIR
set -eu
src="$1"; bin="$2"; venv="$3"
rc=0; bash "$src/scripts/python-env.sh" "$venv" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "SKIPPED: no Python environment with safetensors (exit $rc)"
  exit 77
fi
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$bin" write "$dir/from_varsync.safetensors"
"$venv/bin/python" "$src/tests/interop/safetensors_interop.py" \
  "$dir/from_varsync.safetensors" "$dir/from_python.safetensors"
"$bin" check "$dir/from_python.safetensors"
echo "interop OK"
