#!/usr/bin/env bash
# Everything that needs a GPU, in one bounded command, from what
# scripts/gpu-bundle.sh built on another machine (.gpu/ beside the tree): no
# configure, no build, no network here. scripts/gpu-check.sh runs it by
# default; run it directly as
#
#   BUDGET=480 bash scripts/gpu-once.sh          (from the repository root)
#
# Phases, each bounded with `timeout`, the whole by BUDGET seconds:
#   env        GPU, driver, NCCL, unresolved libraries; the CTest files are
#              pointed at this machine's paths
#   tests      in parallel: every CTest test labelled gpu (-j 12; the
#              "gpus" layout, which on one GPU repeats one-gpu, and the
#              cross-process rule tables excluded), the rule table across
#              2 processes in three runs (one-gpu over shared memory, mixed
#              over Gloo, one-gpu over NCCL with an NCCL_HOSTID per
#              process), cuda_step in five layouts, the bad-input matrix's
#              GPU rows
#   sanitize   in parallel: compute-sanitizer memcheck on gpu_tests and on
#              the one-gpu rule table (timing cases left out), initcheck on
#              gpu_tests, racecheck and synccheck on the kernels' own cases
#   bench      gpu_allreduce --quick
#   again      failed CTest tests once more, one at a time, NCCL_DEBUG=INFO
# A skipped test counts as a failure on a GPU machine. $OUT (default
# ./gpu-out) gets summary.txt, logs.tgz and bench.jsonl; the summary is
# printed last. Exit 0 only if every phase passed.
set -uo pipefail
BUDGET=${BUDGET:-480}
root=$(pwd)
G=$root/.gpu
T=$G/tree
if [[ ! -d "$T" ]]; then
  echo "gpu-once.sh: no .gpu/ here: run scripts/gpu-bundle.sh on the build machine and carry .gpu/" >&2
  exit 2
fi
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpu-once.XXXX)
mkdir -p "$W/logs"
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( BUDGET - $(elapsed) )); }
S=$W/summary.txt
say() { echo "[$(elapsed)s] $*" | tee -a "$S"; }

B=$W/bin
mkdir -p "$B"
for f in tests/gpu/gpu_tests tests/gpu/nccl_rank tests/gpu/gpu_semantics_tests \
         examples/cuda_step bench/gpu/gpu_allreduce tests/reliability_tests; do
  ln -sf "$T/$f" "$B/$(basename "$f")"
done
nccl=$(ls /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
          /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2 \
          /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2 \
          2>/dev/null | head -1)
[[ -n "$nccl" ]] || nccl=$(find / -xdev -name libnccl.so.2 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$G/lib:$(dirname "${nccl:-/none/x}"):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$PATH:/usr/local/cuda/bin"
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export B W root T

# -- what the phases run (through bash -c, under timeout) ----------------------
gpu_ctest() {
  ctest --test-dir "$T" -L gpu -E '^gpu\.(gpus|processes)\.' -j 12 \
    --output-on-failure --output-junit "$W/logs/ctest.xml"
}
# The rule table across 2 processes. Not through CTest: runs that CTest
# starts together could draw their port blocks from one random set.
across() { # layout [transport] [nccl]
  VARSYNC_TEST_LAYOUT=$1 VARSYNC_TEST_TRANSPORT=${2:-} \
    VARSYNC_TEST_NCCL_HOSTID=${3:-0} \
    bash "$root/tests/semantics/run_across_processes.sh" \
    "$B/gpu_semantics_tests" 2 170 "~[one-process]" --warn NoTests
}
examples() {
  local d
  for d in cuda:0 cuda:0,cuda:0 cuda:0,cuda:0,cuda:0,cuda:0 cpu:0,cuda:0 \
           cuda:0,cpu:0,cuda:0,cpu:1; do
    echo "== cuda_step --devices $d"
    "$B/cuda_step" --devices "$d" --size 1048576 || return 1
  done
}
# API errors are not reported: the tests provoke some on purpose (an
# allocation beyond the GPU's memory must be out_of_memory).
cs() { compute-sanitizer --tool "$1" --error-exitcode 99 --report-api-errors no "${@:2}"; }
# name seconds command...: one row of the table (PASS, FAIL(rc), TIMEOUT,
# SKIP(77), which is a failure here)
run() {
  local name=$1 t=$2
  shift 2
  local start rc=0
  start=$(date +%s)
  timeout -k 5 "$t" bash -c "$(declare -f gpu_ctest across examples cs); \"\$@\"" \
    _ "$@" >"$W/logs/$name.log" 2>&1 || rc=$?
  local secs=$(( $(date +%s) - start )) st
  case $rc in
    0) st=PASS ;;
    77) st="SKIP(77)=FAIL" ;;
    124|137) st="TIMEOUT(${t}s)" ;;
    *) st="FAIL($rc)" ;;
  esac
  printf '%-24s %-15s %4ss\n' "$name" "$st" "$secs" >>"$W/table.txt"
  [[ $rc -eq 0 ]]
}
finish() {
  say "done in $(elapsed) s"
  {
    echo "== phases"
    cat "$W/table.txt" 2>/dev/null
    if [[ -f "$W/logs/ctest.log" ]]; then
      echo "== ctest"
      grep -E 'tests passed|Total Test time|\*\*\*(Failed|Timeout|Exception)|Not Run|Skipped' \
        "$W/logs/ctest.log" | head -40
    fi
    # What the two-process NCCL cases measured (their output is in the
    # JUnit file even when they pass).
    grep -ho 'RESULT[^&<]*' "$W/logs/ctest.xml" 2>/dev/null | sort -u
  } >>"$S"
  awk '$2 != "PASS" {print $1}' "$W/table.txt" 2>/dev/null | while read -r n; do
    f="$W/logs/$n.log"
    [[ -f "$f" ]] || continue
    echo "---- $n" >>"$S"
    if grep -q -E 'FAILED:|Failed' "$f"; then
      grep -E -B2 -A10 'FAILED:' "$f" | head -60 >>"$S"
      grep -E '^\s+[0-9]+ - ' "$f" | head -20 >>"$S"
    else
      tail -n 25 "$f" >>"$S"
    fi
  done
  cp "$S" "$OUT/summary.txt"
  tar -C "$W" -czf "$OUT/logs.tgz" logs table.txt 2>/dev/null
  tail -c 11000 "$S"
}
trap finish EXIT

# ---- env ---------------------------------------------------------------------
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  "$B/nccl_rank" env
  echo "nccl library: ${nccl:-NONE}"
  echo "bundle: $(tr '\n' ' ' <"$G/commit" 2>/dev/null)"
  command -v compute-sanitizer ctest
} >"$W/logs/env.log" 2>&1
for b in "$B"/*; do
  ldd "$b" | grep "not found" | sed "s|^|$(basename "$b"): |"
done >"$W/logs/ldd.log"
say "env: $(head -2 "$W/logs/env.log" | tr '\n' ';') $(sed -n 4p "$W/logs/env.log")"
if [[ -s "$W/logs/ldd.log" ]]; then
  say "MISSING LIBRARIES: $(tr '\n' ' ' <"$W/logs/ldd.log")"
  exit 1
fi
. "$G/paths.env"
find "$T" -name '*.cmake' -exec sed -i -e "s|$OLD_BUILD|$T|g" -e "s|$OLD_SRC|$root|g" \
  -e 's|TIMEOUT 300|TIMEOUT 150|g' -e 's|"TIMEOUT" "300"|"TIMEOUT" "150"|g' {} +

# ---- tests -------------------------------------------------------------------
t1=$(( $(left) * 45 / 100 ))
say "tests: ctest -L gpu -j 12, the rule table across 2 processes x3, examples (cap ${t1}s)"
run ctest "$t1" gpu_ctest &
run across_one_gpu "$t1" across one-gpu &
run across_mixed_gloo "$t1" across mixed gloo &
run across_one_gpu_nccl "$t1" across one-gpu "" 1 &
run examples 90 examples &
run bad_input_gpu 90 "$B/reliability_tests" "bad input matrix*" &
wait
if grep -q -E 'Not Run|\*\*\*Skipped' "$W/logs/ctest.log" 2>/dev/null; then
  printf '%-24s %-15s\n' ctest_skips FAIL >>"$W/table.txt"
fi
say "tests over: $(grep -E 'tests passed' "$W/logs/ctest.log" 2>/dev/null)"

# ---- sanitize ----------------------------------------------------------------
if [[ $(left) -gt 100 ]]; then
  t2=$(( $(left) - 80 < 200 ? $(left) - 80 : 200 ))
  say "sanitize: compute-sanitizer x5 (cap ${t2}s)"
  # Child processes are not followed: the two-process cases stay out.
  run memcheck_gpu_tests "$t2" cs memcheck "$B/gpu_tests" "~[processes]" &
  run initcheck_gpu_tests "$t2" cs initcheck "$B/gpu_tests" "~[nccl]" &
  # varsync's kernels use no shared memory and no barriers: the kernels'
  # own cases guard that this stays so.
  run racecheck_kernels "$t2" cs racecheck "$B/gpu_tests" \
    "[cuda_device],[same_gpu],[rows],[widen]" &
  run synccheck_kernels "$t2" cs synccheck "$B/gpu_tests" \
    "[cuda_device],[same_gpu],[rows],[widen]" &
  VARSYNC_TEST_LAYOUT=one-gpu run memcheck_rule_table "$t2" cs memcheck \
    "$B/gpu_semantics_tests" "~W8*" "~V3*" "~X4*" "~M3*" "~M4*" &
  wait
fi

# ---- bench -------------------------------------------------------------------
if [[ $(left) -gt 60 ]]; then
  say "bench: gpu_allreduce --quick"
  run bench $(( $(left) - 25 )) "$B/gpu_allreduce" --quick --json "$OUT/bench.jsonl"
fi

# ---- again -------------------------------------------------------------------
if [[ $(left) -gt 25 ]] && grep -q -E '[1-9][0-9]* tests failed out of' "$W/logs/ctest.log" 2>/dev/null; then
  say "again: failed CTest tests alone, NCCL_DEBUG=INFO"
  NCCL_DEBUG=INFO run again $(( $(left) - 10 )) ctest --test-dir "$T" --rerun-failed \
    --output-on-failure -j 1
fi

! awk '$2 != "PASS"' "$W/table.txt" 2>/dev/null | grep -q .
