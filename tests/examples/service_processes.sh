#!/usr/bin/env bash
# The service example across 2 and 4 processes (varsync-run, services mode):
# every process must pass its checks (process 0: the aggregate over every
# process and the control's last tick; each process: its replicas' counts
# and the closing rate_limit).
#
#   service_processes.sh SERVICE_BINARY VARSYNC_RUN WORKDIR
set -euo pipefail
service=$1
launcher=$2
workdir=$3
mkdir -p "$workdir"
for np in 2 4; do
  log="$workdir/np$np.log"
  echo "== varsync-run -np $np $service --smoke"
  "$launcher" -np "$np" --timeout-ms 20000 "$service" --smoke >"$log" 2>&1 \
    || { cat "$log"; exit 1; }
  count=$(grep -c '^service: all checks passed' "$log" || true)
  aggregate=$(grep -c '^requests_served: 400 (control.s last read 400)' "$log" || true)
  if [ "$count" != "$np" ] || [ "$aggregate" != 1 ]; then
    cat "$log"
    echo "FAILED: $count of $np processes passed; aggregate lines: $aggregate"
    exit 1
  fi
  echo "$np processes: all checks passed"
done
