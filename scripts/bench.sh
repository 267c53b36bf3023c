#!/usr/bin/env bash
# Builds and runs varsync's benchmark suite and its peers, prints one table,
# and writes bench/results/latest.json, docs/results.md (all but its last
# section, "Figures from other commands") and docs/bandwidth.png.
#
#   bash scripts/bench.sh [--quick] [--no-docs]
#
#   --quick    smaller sizes (bulk up to 64 MiB) and fewer calls (~3 min)
#   --no-docs  leave docs/ alone (table and JSON only)
#
# Installs what is missing with apt-get (as root, or through sudo):
# the build packages (scripts/setup.sh), libbenchmark-dev, openmpi-bin,
# libopenmpi-dev and gnuplot-nox. The TensorFlow peer runs in the virtual
# environment bench/.venv-tf, which this script creates (pip install
# tensorflow-cpu, several hundred MB, once) when PyPI is reachable, and reuses
# afterwards; without it the TensorFlow rows are marked skipped. Figures
# depend on the machine and on its load: the ratios in the table compare
# figures of the same run. No figure is asserted; the exit status reports
# only whether the suite ran.
#
# Environment: VARSYNC_BENCH_BUILD (build directory, default build-bench),
# VARSYNC_BENCH_JOBS (parallel compile jobs, default nproc).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

quick=0
docs=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-docs) docs=0 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
mode=full
quick_flag=()
if [[ $quick -eq 1 ]]; then
  mode=quick
  quick_flag=(--quick)
fi

build_dir="${VARSYNC_BENCH_BUILD:-build-bench}"
jobs="${VARSYNC_BENCH_JOBS:-$(nproc 2>/dev/null || echo 2)}"
results="bench/results"
raw="$results/raw"
venv="bench/.venv-tf"
start=$(date +%s)

say() { echo "bench.sh: $*"; }

# -- packages -------------------------------------------------------------------
bash scripts/setup.sh >/dev/null || { say "scripts/setup.sh failed"; exit 1; }
extra=(libbenchmark-dev openmpi-bin libopenmpi-dev gnuplot-nox)
missing=()
for pkg in "${extra[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  as_root=()
  if [[ "$(id -u)" -ne 0 ]] && command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  fi
  say "installing ${missing[*]}"
  if ! { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
         && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
              apt-get install -y -qq --no-install-recommends "${missing[@]}"; \
       } >/dev/null; then
    say "could not install ${missing[*]}; the rows that need them are skipped"
  fi
fi

# -- build ------------------------------------------------------------------------
targets=(api_latency local_updates bulk scale copy_bandwidth overload sparse
         step_collectives optimizer metrics_overhead concurrent_callers)
say "building ${targets[*]} in ${build_dir} (Release)"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DVARSYNC_BUILD_BENCH=ON -DVARSYNC_BUILD_TESTS=OFF \
  -DVARSYNC_BUILD_EXAMPLES=OFF >/dev/null
mkdir -p "$results"
# The cross-process row, where the Gloo transport is built.
if ninja -C "$build_dir" -t targets all 2>/dev/null | grep -q '^process_strategy:'; then
  targets+=(process_strategy)
fi
if ! ninja -C "$build_dir" -j "$jobs" "${targets[@]}" >"$results/build.log" 2>&1; then
  grep -E 'error|FAILED' "$results/build.log" | head -20 >&2 || true
  say "the build failed (see $results/build.log)"
  exit 1
fi
bin="$build_dir/bench"

rm -rf "$raw"
mkdir -p "$raw"
skip() { # skip <what> <reason>
  printf '{"key": "skip.%s", "value": 0, "unit": "", "reason": "%s"}\n' \
    "$1" "$2" >>"$raw/skips.jsonl"
  say "skipping $1: $2"
}

have_mpi=0
if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
  if mpicc -O2 -o "$bin/mpi_allreduce" bench/peers/mpi_allreduce.c; then
    have_mpi=1
  else
    skip mpi "mpicc failed"
  fi
else
  skip mpi "OpenMPI (openmpi-bin, libopenmpi-dev) is not installed"
fi

# -- TensorFlow peer: bench/.venv-tf ------------------------------------------
have_tf=0
tf_ok() { "$venv/bin/python" -c "import tensorflow" >/dev/null 2>&1; }
if [[ -x "$venv/bin/python" ]] && tf_ok; then
  have_tf=1
else
  say "creating $venv with tensorflow-cpu from PyPI (large, once)"
  rm -rf "$venv"
  if python3 -m venv "$venv" >/dev/null 2>&1 \
     && timeout 1800 "$venv/bin/python" -m pip install --quiet \
          --disable-pip-version-check --timeout 20 --retries 1 \
          tensorflow-cpu >/dev/null 2>&1 \
     && tf_ok; then
    have_tf=1
  else
    rm -rf "$venv"
    skip tf "tensorflow-cpu could not be installed into $venv (PyPI unreachable?)"
  fi
fi

# -- run ----------------------------------------------------------------------------
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
step=0
# The fusion row again at three (quick: one) later points of the suite: a
# fused step's time follows the host's wake-up periods, which last seconds;
# bench/report.py takes the median of the runs.
fusion_runs=4
[[ $quick -eq 1 ]] && fusion_runs=2
# The control plane compares with bare CAF round trips whose time swings
# with load: several runs, judged on the median of their medians
# (bench/report.py merges the runs and prints their quartiles).
control_runs=5
[[ $quick -eq 1 ]] && control_runs=3
# Ten programs once, process_strategy for 2 and 4 processes, the repeats.
steps=$((12 + control_runs + fusion_runs - 1 + have_mpi * 2 + have_tf * 2))
fusion_run=1
fusion_again() { # fusion_again <last>: one more fusion run unless past <last>
  [[ $fusion_run -lt $fusion_runs && $fusion_run -lt $1 ]] || return 0
  fusion_run=$((fusion_run + 1))
  run "fusion.$fusion_run" 120 "$bin/bulk" "${quick_flag[@]}" \
    --json "$json/fusion.run$fusion_run.jsonl" fusion
}
run() { # run <name> <timeout s> <command...>: stdout/stderr to raw/<name>.log
  local name="$1" limit="$2"
  shift 2
  step=$((step + 1))
  local t0=$(date +%s)
  printf 'bench.sh: [%d/%d] %-22s ' "$step" "$steps" "$name"
  local status=0
  timeout "$limit" "$@" >"$raw/$name.log" 2>&1 || status=$?
  local dt=$(( $(date +%s) - t0 ))
  if [[ $status -eq 0 ]]; then
    echo "${dt} s"
  else
    echo "${dt} s, FAILED (status $status; see $raw/$name.log)"
    tail -n 5 "$raw/$name.log" | sed 's/^/    /'
    local what="$name"
    case "$name" in
      tf_mirrored.*) what=tf ;;
      mpi_allreduce.*) what=mpi ;;
    esac
    skip "$what" "$name exited with status $status"
  fi
}

json="$root/$raw"
# The memory references first, the bulk figures right after them.
run copy_bandwidth 240 "$bin/copy_bandwidth" "${quick_flag[@]}" \
  --json "$json/copy.jsonl"
run bulk 420 "$bin/bulk" "${quick_flag[@]}" --json "$json/bulk.jsonl" \
  bulk fusion parallel
sizes=(1024 4096 65536 1048576 2097152 4194304 16777216 67108864)
[[ $quick -eq 1 ]] || sizes+=(268435456)
if [[ $have_mpi -eq 1 ]]; then
  budget=1.0
  [[ $quick -eq 1 ]] && budget=0.3
  for n in 2 4; do
    run "mpi_allreduce.r$n" 300 bash -c \
      "mpirun --allow-run-as-root --oversubscribe -np $n \
         '$bin/mpi_allreduce' --budget $budget ${sizes[*]} \
         > '$json/mpi.r$n.jsonl'"
  done
fi
if [[ $have_tf -eq 1 ]]; then
  for n in 2 4; do
    run "tf_mirrored.r$n" 420 "$venv/bin/python" bench/peers/tf_mirrored.py \
      --replicas "$n" "${quick_flag[@]}" --json "$json/tf.r$n.jsonl"
  done
fi
fusion_again 2
for i in $(seq 1 "$control_runs"); do
  run "api_latency.$i" 300 "$bin/api_latency" "${quick_flag[@]}" \
    --json "$json/control.run$i.jsonl"
done
fusion_again 3
run concurrent_callers 240 "$bin/concurrent_callers" "${quick_flag[@]}" \
  --json "$json/concurrent.jsonl"
run local_updates 240 "$bin/local_updates" "${quick_flag[@]}" \
  --json "$json/local.jsonl"
run scale 240 "$bin/scale" "${quick_flag[@]}" --json "$json/scale.jsonl"
run sparse 240 "$bin/sparse" "${quick_flag[@]}" --json "$json/sparse.jsonl"
run step_collectives 240 "$bin/step_collectives" "${quick_flag[@]}" \
  --json "$json/step_collectives.jsonl"
run optimizer 240 "$bin/optimizer" "${quick_flag[@]}" \
  --json "$json/optimizer.jsonl"
run metrics_overhead 300 "$bin/metrics_overhead" "${quick_flag[@]}" \
  --json "$json/metrics.jsonl"
run overload 120 "$bin/overload" "${quick_flag[@]}" \
  --json "$json/overload.jsonl"
# Across processes (built with Gloo): 2 and 4 processes on loopback.
for n in 2 4; do
  if [[ " ${targets[*]} " == *" process_strategy "* ]]; then
    run "process_strategy.p$n" 420 "$bin/process_strategy" "${quick_flag[@]}" \
      --processes "$n" --json "$json/processes.p$n.jsonl"
  else
    step=$((step + 1))
    echo "bench.sh: [$step/$steps] process_strategy.p$n    skipped (no Gloo)"
  fi
done
fusion_again 4
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# -- report -------------------------------------------------------------------------
cores="$(nproc 2>/dev/null || echo 1)"
note=""
if awk -v a="${load_start%% *}" -v b="${load_end%% *}" -v c="$cores" \
     'BEGIN { exit !((a > c * 0.75) || (b > c * 0.75)) }'; then
  note="The machine was loaded during this run (load average ${load_start} at the start, ${load_end} at the end, ${cores} cores): absolute figures are noisy."
fi
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain 2>/dev/null | grep -v '^??' || true)" ]]; then
  commit="$commit+local changes"
fi
extra_json=$(printf '{"load_start": "%s", "load_end": "%s", "commit": "%s", "load_note": "%s", "seconds": %d}' \
  "$load_start" "$load_end" "$commit" "$note" "$(( $(date +%s) - start ))")
doc_args=()
if [[ $docs -eq 1 ]]; then
  doc_args=(--md docs/results.md --png docs/bandwidth.png)
fi
command="bash scripts/bench.sh"
[[ $quick -eq 1 ]] && command="$command --quick"
echo
python3 bench/report.py --raw "$raw" --json "$results/latest.json" \
  --mode "$mode" --command "$command" --extra "$extra_json" "${doc_args[@]}"
[[ -n "$note" ]] && echo "$note"
say "done in $(( $(date +%s) - start )) s"
