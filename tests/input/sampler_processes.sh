#!/usr/bin/env bash
# Distributed input across processes (I2, I7): 4 replicas over 2 processes
# (varsync-run) get exactly the items 4 replicas in one process get, every
# item once per epoch, without the processes talking about it; the position
# saved mid-epoch across 2 processes resumes in 1 process with 3 replicas
# and across 2 processes with 2, each time serving exactly the items the
# epoch had left.
#
#   sampler_processes.sh SAMPLER_RANK VARSYNC_RUN WORKDIR
set -euo pipefail
rank=$1
launcher=$2
workdir=$3
mkdir -p "$workdir"
rm -f "$workdir"/*.safetensors "$workdir"/*.log

run() { # name command...
  local name=$1
  shift
  echo "== $name: $*"
  "$@" >"$workdir/$name.log" 2>&1 || { cat "$workdir/$name.log"; echo "FAILED: $name"; exit 1; }
}
# "item E S R I" lines, whatever prefix the launcher puts before them.
items() { grep -oE 'item [0-9]+ [0-9]+ [0-9]+ [0-9]+' "$1" | sort; }

run single "$rank" run "$workdir/single.safetensors" 4
run np2 "$launcher" -np 2 --timeout-ms 20000 "$rank" run "$workdir/np2.safetensors" 4
if ! diff <(items "$workdir/single.log") <(items "$workdir/np2.log") >"$workdir/diff.txt"; then
  head -20 "$workdir/diff.txt"
  echo "FAILED: 2 processes got other items than 1 process"; exit 1
fi
echo "2 processes: the items of 1 process, replica by replica, step by step"

# every item 0..102 exactly once in each epoch
for epoch in 0 1; do
  items "$workdir/single.log" | awk -v e="$epoch" '
    $2 == e { seen[$5]++; n++ }
    END { for (i = 0; i < 103; i++) if (seen[i] != 1) { print "FAILED: epoch " e ", item " i " seen " seen[i] + 0 " times"; bad = 1 }
          if (n != 103) { print "FAILED: epoch " e ": " n " items"; bad = 1 }
          exit bad }'
done
echo "each epoch: 103 disjoint items covering the dataset"

# Resumed from the position saved after step 5 of epoch 1: steps 0..4 and
# the resumed run's together cover epoch 1 once.
check_resume() { # name
  { items "$workdir/np2.log" | awk '$2 == 1 && $3 < 5'
    items "$workdir/$1.log"; } | awk -v what="$1" '
    $2 != 1 { print "FAILED: " what ": epoch " $2; bad = 1 }
    { seen[$5]++; n++ }
    END { for (i = 0; i < 103; i++) if (seen[i] != 1) { print "FAILED: " what ": item " i " seen " seen[i] + 0 " times"; bad = 1 }
          if (n != 103) { print "FAILED: " what ": " n " items"; bad = 1 }
          if (!bad) print what ": the rest of epoch 1, each item once"
          exit bad }'
}
run resume3 "$rank" resume "$workdir/np2.safetensors" 3
check_resume resume3
run resume_np2 "$launcher" -np 2 --timeout-ms 20000 "$rank" resume "$workdir/np2.safetensors" 2
check_resume resume_np2
echo "distributed input across processes: passed"
