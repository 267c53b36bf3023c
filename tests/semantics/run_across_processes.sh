#!/usr/bin/env bash
# Runs the rule-table tests (semantics_tests) across P processes on
# loopback: P copies of the binary run the same test cases in the same order
# (SPMD), and each strategy of N replicas a test makes spans the processes
# (tests/semantics/fixture.hpp, test_cluster). Every copy must pass; 77
# when every copy skipped (the GPU build without a GPU). The copies are
# killed at the deadline whatever happens.
#
#   run_across_processes.sh BINARY P DEADLINE_SECONDS [catch arguments...]
set -uo pipefail
binary=$1
procs=$2
deadline=$3
shift 3
# A block of 200 ports of its own per run (the k-th strategy uses
# base + k mod 200), below Linux's ephemeral range (32768 up), where the
# other tests' connections take their ports. Runs that CTest may run at
# the same time (another process count, the other transport) never share
# a block: each has a slot of its own among 12. (With one slot per process
# count, semantics.processes.4 and .4.gloo drew the same block one time in
# 27 when they ran together, and each then reached the other's processes
# and hung to the deadline.)
# VARSYNC_TEST_NCCL_HOSTID=1 gives each process an NCCL_HOSTID of its own
# (processes on one GPU then form NCCL communicators: NCCL takes them for
# separate hosts) and a slot of its own too.
slot=$(( procs < 2 ? 0 : (procs - 2) % 4 ))
[[ -n "${VARSYNC_TEST_TRANSPORT:-}" ]] && slot=$(( slot + 4 ))
nccl_hostid=${VARSYNC_TEST_NCCL_HOSTID:-0}
[[ "$nccl_hostid" == 1 ]] && slot=$(( slot + 8 ))
base=$(( 10000 + ((RANDOM % 9) * 12 + slot) * 200 ))
pids=()
logs=$(mktemp -d)
# The files the tests share live under names with "p$base" (fixture.hpp,
# shared_run_id); they go when every process is done.
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$logs" /tmp/varsync-*-p"$base"-*' EXIT
for ((r = 0; r < procs; ++r)); do
  nccl_env=()
  if [[ "$nccl_hostid" == 1 ]]; then
    nccl_env=(NCCL_HOSTID="varsync-$base-$r"
              NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}")
  fi
  env "${nccl_env[@]}" VARSYNC_TEST_PROCESSES=$procs VARSYNC_TEST_RANK=$r \
    VARSYNC_TEST_PORT=$base \
    timeout -s KILL "$deadline" "$binary" "$@" >"$logs/$r.log" 2>&1 &
  pids+=($!)
done
status=0
skipped=0
for ((r = 0; r < procs; ++r)); do
  wait "${pids[$r]}"
  rc=$?
  if [ $rc -eq 77 ]; then
    skipped=$((skipped + 1)) # the GPU build on a machine without a GPU
  elif [ $rc -ne 0 ]; then
    status=1
    echo "== process $r of $procs failed:"
    cat "$logs/$r.log"
  fi
done
if [ $skipped -eq "$procs" ]; then
  cat "$logs/0.log"
  exit 77
fi
if [ $skipped -gt 0 ]; then
  status=1
  echo "== $skipped of $procs processes skipped (exit 77), the others did not"
fi
if [ $status -eq 0 ]; then
  tail -n 3 "$logs/0.log"
  echo "all $procs processes passed"
fi
exit $status
