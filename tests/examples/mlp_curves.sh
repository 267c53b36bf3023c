#!/usr/bin/env bash
# The mlp example (Adam) must follow the same loss curve, step by step,
# with 1 replica, 4 replicas, and 4 replicas over 2 processes (varsync-run):
# every step's global-batch loss within a relative 1e-4 of the 1-replica
# run's (the gradients' sums add in another order, nothing else differs).
#
#   mlp_curves.sh MLP_BINARY VARSYNC_RUN WORKDIR
set -euo pipefail
mlp=$1
launcher=$2
workdir=$3
mkdir -p "$workdir"
run() { # name command...
  local name=$1
  shift
  "$@" >"$workdir/$name.log" 2>&1 || { cat "$workdir/$name.log"; echo "FAILED: $name"; exit 1; }
}
run one "$mlp" --smoke --replicas 1 --print-losses
run four "$mlp" --smoke --replicas 4 --print-losses
run processes "$launcher" -np 2 --timeout-ms 20000 "$mlp" --smoke --replicas 4 --print-losses
grep -q '^mlp: converged' "$workdir/one.log" || { cat "$workdir/one.log"; exit 1; }
# Each process prints the curve; process 0's lines come with its prefix or
# none, so compare every "loss" line's values in order per process.
curve() { grep -oE 'loss [0-9]+ [-+0-9.e]+' "$1"; }
compare() { # reference other what
  awk -v what="$3" '
    NR == FNR { ref[$2] = $3 + 0; n++; next }
    { seen++; hit[$2]++; got = $3 + 0; want = ref[$2]
      if (!($2 in ref)) { printf "FAILED: %s: step %s is not in the 1-replica curve\n", what, $2; bad = 1 }
      d = got - want; if (d < 0) d = -d
      m = want < 0 ? -want : want
      if (d > 1e-4 * m + 1e-12) { printf "FAILED: %s, step %s: loss %.9g, 1 replica: %.9g\n", what, $2, got, want; bad = 1 } }
    END { if (seen == 0) { print "FAILED: " what ": no losses"; exit 1 }
          # Every step of the reference, as often in every process.
          for (step in ref) if (hit[step] != seen / n) {
            printf "FAILED: %s: step %s seen %d times, expected %d\n", what, step, hit[step], seen / n; bad = 1 }
          if (seen % n != 0) { printf "FAILED: %s: %d losses for a curve of %d steps\n", what, seen, n; bad = 1 }
          if (bad) exit 1
          printf "%s: %d step losses within 1e-4 of the 1-replica curve\n", what, seen }' \
    <(curve "$1") <(curve "$2")
}
compare "$workdir/one.log" "$workdir/four.log" "4 replicas"
compare "$workdir/one.log" "$workdir/processes.log" "4 replicas over 2 processes"
echo "mlp: the same loss curve"
