#!/usr/bin/env bash
# An interrupted and resumed training run must end with bitwise the same
# weights as an uninterrupted one.
#
#   training_resume.sh TRAINING_BINARY WORKDIR
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 TRAINING_BINARY WORKDIR" >&2
  exit 2
fi
training=$1
workdir=$2
ckpt=$workdir/ckpt.safetensors
epochs=8
stop_after=3

mkdir -p "$workdir" || exit 1
# A checkpoint left by an earlier run must not be what the resume reads.
rm -f "$ckpt" "$workdir"/*.log

run() { # NAME ARGS...: runs the binary, its output in WORKDIR/NAME.log
  local name=$1
  shift
  echo "== $name: $training $*"
  "$training" "$@" >"$workdir/$name.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    cat "$workdir/$name.log"
    echo "FAILED  $name exited $rc"
    exit 1
  fi
}

weights() { # NAME: the one "weights ..." line of WORKDIR/NAME.log
  local lines
  lines=$(grep '^weights ' "$workdir/$1.log")
  if [ "$(printf '%s\n' "$lines" | grep -c '^weights ')" -ne 1 ]; then
    cat "$workdir/$1.log"
    echo "FAILED  $1 printed no single weights line"
    exit 1
  fi
  printf '%s\n' "$lines"
}

run full --smoke --epochs $epochs --print-weights
run first --smoke --epochs $epochs --checkpoint "$ckpt" --stop-after-epoch $stop_after
if [ ! -s "$ckpt" ]; then
  echo "FAILED  no checkpoint at $ckpt"
  exit 1
fi
if ! grep -q "^stopped after epoch $stop_after\$" "$workdir/first.log"; then
  cat "$workdir/first.log"
  echo "FAILED  the first run did not stop after epoch $stop_after"
  exit 1
fi
run resumed --smoke --epochs $epochs --resume "$ckpt" --print-weights

full=$(weights full) || { echo "$full"; exit 1; }
resumed=$(weights resumed) || { echo "$resumed"; exit 1; }
echo "full:    $full"
echo "resumed: $resumed"
if [ "$full" != "$resumed" ]; then
  echo "FAILED  the resumed run ended with other weights"
  exit 1
fi
echo "training resume: identical weights"
