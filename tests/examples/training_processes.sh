#!/usr/bin/env bash
# The training example over 2 and 4 processes (varsync-run) must end with
# the weights of the single-process run with the same four replicas: equal
# within float tolerance (the sum over processes adds in another order),
# bitwise in practice; and stopped and resumed from a checkpoint across 2
# processes, bitwise the uninterrupted weights.
#
#   training_processes.sh TRAINING_BINARY VARSYNC_RUN WORKDIR
set -euo pipefail
training=$1
launcher=$2
workdir=$3
mkdir -p "$workdir"

# shellcheck source=weights.sh
source "$(dirname "$0")/weights.sh"

"$training" --smoke --print-weights >"$workdir/single.log" 2>&1 \
  || { cat "$workdir/single.log"; exit 1; }
want=$(weights_of "$workdir/single.log")
for np in 2 4; do
  log="$workdir/np$np.log"
  echo "== varsync-run -np $np $training --smoke --print-weights"
  "$launcher" -np "$np" --timeout-ms 20000 "$training" --smoke --print-weights \
    >"$log" 2>&1 || { cat "$log"; exit 1; }
  count=$(grep -c '^training: converged, all checks passed' "$log" || true)
  if [ "$count" != "$np" ]; then
    cat "$log"; echo "FAILED: $count of $np processes passed"; exit 1
  fi
  while read -r line; do
    same_weights "$want" "${line#weights }" "$np processes"
  done < <(grep '^weights ' "$log")
  echo "$np processes: the single-process weights"
done
# Stopped after a checkpoint and resumed, across 2 processes (process 0
# writes the file, both read it): the uninterrupted weights again.
ckpt="$workdir/np2.safetensors"
rm -f "$ckpt"
"$launcher" -np 2 --timeout-ms 20000 "$training" --smoke --checkpoint "$ckpt" \
  --stop-after-epoch 3 >"$workdir/np2-stop.log" 2>&1 || { cat "$workdir/np2-stop.log"; exit 1; }
"$launcher" -np 2 --timeout-ms 20000 "$training" --smoke --resume "$ckpt" \
  --print-weights >"$workdir/np2-resume.log" 2>&1 || { cat "$workdir/np2-resume.log"; exit 1; }
got=$(weights_of "$workdir/np2-resume.log")
if [ "$got" != "$want" ]; then
  echo "FAILED: resumed across 2 processes: $got, uninterrupted: $want"; exit 1
fi
echo "2 processes, stopped after epoch 3 and resumed: the same weights"
echo "training across processes: same weights"
