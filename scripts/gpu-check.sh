#!/usr/bin/env bash
# Proves the CUDA backend on a machine with a GPU, in one command, from the
# repository root:
#
#   scripts/gpu-check.sh                 the default: runs scripts/gpu-once.sh
#                                        over what scripts/gpu-bundle.sh built
#                                        on another machine (.gpu/ carried
#                                        with the tree): about 8 minutes,
#                                        nothing built here (BUDGET=seconds)
#   scripts/gpu-check.sh --build [--build-dir DIR] [--stages LIST] [--quick]
#                                        the fallback: builds here with every
#                                        core, then runs each stage, timed
#                                        and reported:
#   tests       every CTest test labelled gpu (CUDA unit tests, NCCL clique,
#               the two-process NCCL cases, the rule-table suite in the
#               one-gpu, gpus and mixed layouts and across processes, the
#               cuda_step example); a skipped GPU test is a failure
#   examples    cuda_step on cuda:0, cuda:0 x2 and x4, and on every GPU
#   bench       bench/gpu/gpu_allreduce (figures in the report)
#   sanitizers  compute-sanitizer memcheck, racecheck and synccheck on the
#               CUDA unit tests
#   host        the whole host test suite (ctest -LE gpu), for a machine
#               with many cores
# LIST is a comma-separated subset (default: tests,examples,bench,sanitizers).
# The report (gpu-report.md, gpu-report.json, logs) goes to $OUT when it is
# set, else to build/gpu-report/. Exit status: 0 only when every stage run
# passed.
#
# --build needs CMake, Ninja, nvcc and a GPU driver on the machine. CAF,
# spdlog, fmt, Catch2, nlohmann-json, Gloo and Google Benchmark come from
# the system when installed; otherwise from the Debian packages in
# .gpu-deps/ (fill it on a networked Debian 12 machine with
# scripts/gpu-deps.sh), unpacked under the build directory. NCCL comes from
# the CUDA toolkit, $NCCL_ROOT, or the nvidia-nccl Python wheel when that
# is installed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

build_dir="build-gpu-check"
stages="tests,examples,bench,sanitizers"
quick=0
build=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --stages) stages="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $build -eq 0 ]]; then
  if [[ ! -d .gpu/tree ]]; then
    echo "gpu-check.sh: no .gpu/ bundle: run scripts/gpu-bundle.sh on the build" \
         "machine and carry .gpu/ with the tree, or pass --build" >&2
    exit 2
  fi
  exec bash scripts/gpu-once.sh
fi
for s in ${stages//,/ }; do
  case "$s" in
    tests|examples|bench|sanitizers|host) ;;
    *) echo "gpu-check.sh: unknown stage '$s'" >&2; exit 2 ;;
  esac
done
has_stage() { [[ ",$stages," == *",$1,"* ]]; }

report_dir="${OUT:-$root/build/gpu-report}"
mkdir -p "$report_dir"
stage_file="$report_dir/stages.tsv"
: >"$stage_file"
jobs="$(nproc 2>/dev/null || echo 2)"
failed=0

log() { echo "gpu-check.sh: $*"; }

# Runs one stage: name, log file, command... Records status and seconds.
stage() {
  local name="$1" logfile="$2"
  shift 2
  log "stage $name: $*"
  local start end rc=0
  start="$(date +%s.%N)"
  "$@" >"$logfile" 2>&1 || rc=$?
  end="$(date +%s.%N)"
  local secs
  secs="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
  if [[ $rc -eq 0 ]]; then
    printf '%s\tpass\t%s\t%s\n' "$name" "$secs" "$(basename "$logfile")" >>"$stage_file"
    log "stage $name passed (${secs} s)"
  else
    printf '%s\tFAIL(%d)\t%s\t%s\n' "$name" "$rc" "$secs" "$(basename "$logfile")" >>"$stage_file"
    log "stage $name FAILED with status $rc (${secs} s); last lines of $logfile:"
    tail -n 30 "$logfile" | sed 's/^/    /'
    failed=1
  fi
  return 0
}

# --- The GPU and the toolkit ------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  log "nvidia-smi not found: this is not a GPU machine (or its driver is missing)"
  exit 1
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap \
  --format=csv,noheader >"$report_dir/gpus.csv"
log "GPUs: $(tr '\n' ';' <"$report_dir/gpus.csv")"
gpu_count="$(wc -l <"$report_dir/gpus.csv")"
if [[ "$gpu_count" -lt 1 ]]; then
  log "nvidia-smi lists no GPU"
  exit 1
fi
arch="$(head -n1 "$report_dir/gpus.csv" | awk -F', ' '{ gsub(/\./, "", $5); print $5 }')"

if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [[ -x "$d/nvcc" ]]; then export PATH="$d:$PATH"; break; fi
  done
fi
command -v nvcc >/dev/null 2>&1 || { log "nvcc not found"; exit 1; }
cuda_home="$(dirname "$(dirname "$(command -v nvcc)")")"

# --- Host dependencies: the system's, else the carried Debian packages ------
deps_root="$root/$build_dir/deps-root"
prefix_path=()
lib_path=()
if [[ ! -f /usr/include/caf/config.hpp || -n "${VARSYNC_GPU_FORCE_DEPS:-}" ]]; then
  shopt -s nullglob
  debs=("$root"/.gpu-deps/*.deb)
  shopt -u nullglob
  if [[ ${#debs[@]} -eq 0 ]]; then
    if command -v apt-get >/dev/null 2>&1 && [[ -f /etc/debian_version ]] \
       && grep -q '^12' /etc/debian_version; then
      bash scripts/setup.sh
    else
      log "CAF is not installed and .gpu-deps/ holds no packages:"
      log "run scripts/gpu-deps.sh on a networked Debian 12 machine first"
      exit 1
    fi
  else
    mkdir -p "$deps_root"
    for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$deps_root"; done
    prefix_path+=("$deps_root/usr")
    lib_path+=("$deps_root/usr/lib/x86_64-linux-gnu")
    log "unpacked ${#debs[@]} packages from .gpu-deps/ into $deps_root"
  fi
fi

# NCCL: the toolkit's, $NCCL_ROOT, or the Python wheel's (which has no
# unversioned libnccl.so: link one into the build directory).
nccl_args=()
if [[ -z "${NCCL_ROOT:-}" ]] && ! ls "$cuda_home"/lib*/libnccl.so >/dev/null 2>&1 \
   && ! ls /usr/lib/x86_64-linux-gnu/libnccl.so >/dev/null 2>&1; then
  wheel="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
  if [[ -n "$wheel" && -f "$wheel/include/nccl.h" ]]; then
    nccl_root="$root/$build_dir/nccl-root"
    mkdir -p "$nccl_root/lib"
    ln -sfn "$wheel/include" "$nccl_root/include"
    ln -sf "$(ls "$wheel"/lib/libnccl.so* | head -n1)" "$nccl_root/lib/libnccl.so"
    ln -sf "$(ls "$wheel"/lib/libnccl.so* | head -n1)" "$nccl_root/lib/libnccl.so.2"
    nccl_args=(-DNCCL_ROOT="$nccl_root")
    lib_path+=("$nccl_root/lib")
    log "NCCL from the Python wheel at $wheel"
  else
    log "NCCL not found (CUDA toolkit, NCCL_ROOT, nvidia-nccl wheel)"
    exit 1
  fi
fi
if [[ ${#lib_path[@]} -gt 0 ]]; then
  export LD_LIBRARY_PATH="$(IFS=:; echo "${lib_path[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# --- Build --------------------------------------------------------------------
prefix_arg=()
if [[ ${#prefix_path[@]} -gt 0 ]]; then
  prefix_arg=(-DCMAKE_PREFIX_PATH="$(IFS=';'; echo "${prefix_path[*]}")")
fi
configure() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVARSYNC_CUDA=ON -DVARSYNC_BUILD_TESTS=ON -DVARSYNC_BUILD_EXAMPLES=ON \
    -DVARSYNC_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES="${arch}-real" \
    "${prefix_arg[@]}" "${nccl_args[@]}"
}
stage configure "$report_dir/configure.log" configure
stage build "$report_dir/build.log" cmake --build "$build_dir" --parallel "$jobs"
if [[ $failed -ne 0 ]]; then
  log "the build failed; no test ran"
fi

exe() { find "$build_dir" -type f -name "$1" -perm -u+x | head -n1; }

# --- Stages -------------------------------------------------------------------
gpu_tests() {
  local listing
  listing="$(ctest --test-dir "$build_dir" -L gpu -N | tail -n1)"
  echo "$listing"
  if [[ "$listing" == *"Total Tests: 0"* ]]; then
    echo "no test is labelled gpu: the CUDA backend was not built"
    return 1
  fi
  local rc=0
  ctest --test-dir "$build_dir" -L gpu -j 4 --timeout 600 --output-on-failure \
    --output-junit "$report_dir/gpu-tests.junit.xml" || rc=$?
  # A GPU test that skips on a GPU machine means the probe misjudged it.
  if grep -q 'status="disabled"\|status="notrun"\|<skipped' "$report_dir/gpu-tests.junit.xml"; then
    echo "some GPU tests were skipped on a machine with a GPU:"
    grep -o 'name="[^"]*"[^>]*status="\(disabled\|notrun\)"' "$report_dir/gpu-tests.junit.xml" || true
    return 1
  fi
  return $rc
}

examples() {
  local cuda_step
  cuda_step="$(exe cuda_step)"
  [[ -n "$cuda_step" ]] || { echo "cuda_step was not built"; return 1; }
  local layouts=("cuda:0" "cuda:0,cuda:0" "cuda:0,cuda:0,cuda:0,cuda:0"
                 "cpu:0,cuda:0" "cuda:0,cpu:0,cuda:0,cpu:1")
  if [[ "$gpu_count" -gt 1 ]]; then
    local all="" i
    for ((i = 0; i < gpu_count; ++i)); do all+="${all:+,}cuda:$i"; done
    layouts+=("$all")
  fi
  local size=$((1 << 20))
  [[ $quick -eq 1 ]] && size=4096
  for layout in "${layouts[@]}"; do
    echo "== cuda_step --devices $layout --size $size"
    "$cuda_step" --devices "$layout" --size "$size" || return 1
  done
}

bench() {
  local b
  b="$(exe gpu_allreduce)"
  [[ -n "$b" ]] || { echo "gpu_allreduce was not built"; return 1; }
  local args=(--json "$report_dir/gpu_allreduce.json")
  [[ $quick -eq 1 ]] && args+=(--quick)
  "$b" "${args[@]}"
}

# API errors are not reported: the tests provoke some on purpose (a
# cudaMalloc beyond the GPU's memory must give out_of_memory), and NCCL probes
# kernels for other architectures; memory, race and synchronization errors
# are what these tools are for.
sanitize() {
  local tool="$1"
  shift
  echo "== compute-sanitizer --tool $tool $*"
  timeout "${VARSYNC_SANITIZER_TIMEOUT:-400}" \
    compute-sanitizer --tool "$tool" --error-exitcode 99 \
    --report-api-errors no "$@"
}

sanitizers() {
  local t st
  t="$(exe gpu_tests)"
  st="$(exe gpu_semantics_tests)"
  [[ -n "$t" && -n "$st" ]] || { echo "gpu_tests was not built"; return 1; }
  local rc=0 tool
  for tool in memcheck racecheck synccheck; do
    sanitize "$tool" "$t" || rc=1
  done
  # The rule-table suite on logical replicas of one GPU, under memcheck.
  VARSYNC_TEST_LAYOUT=one-gpu sanitize memcheck "$st" || rc=1
  return $rc
}

host_tests() {
  ctest --test-dir "$build_dir" -LE gpu -j "$jobs" --timeout 300 --output-on-failure
}

if [[ $failed -eq 0 ]]; then
  has_stage tests && stage tests "$report_dir/tests.log" gpu_tests
  has_stage examples && stage examples "$report_dir/examples.log" examples
  has_stage bench && stage bench "$report_dir/bench.log" bench
  has_stage sanitizers && stage sanitizers "$report_dir/sanitizers.log" sanitizers
  has_stage host && stage host "$report_dir/host.log" host_tests
fi

# --- Report -------------------------------------------------------------------
# The checkout's HEAD, and whether files differ from it (a copied working
# tree may carry a .git that is older than its files).
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ "$commit" != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then
  commit+=" plus uncommitted changes"
fi
python3 - "$report_dir" "$commit" \
  "$(nvcc --version | tail -n1)" <<'EOF'
import json, os, sys
report, commit, nvcc = sys.argv[1:4]
gpus = []
with open(os.path.join(report, "gpus.csv")) as f:
    for line in f:
        i, name, driver, mem, cc = [x.strip() for x in line.split(",")]
        gpus.append({"index": int(i), "name": name, "driver": driver,
                     "memory": mem, "compute_capability": cc})
stages = []
with open(os.path.join(report, "stages.tsv")) as f:
    for line in f:
        name, status, secs, logname = line.rstrip("\n").split("\t")
        stages.append({"stage": name, "status": status,
                       "seconds": float(secs), "log": logname})
bench = None
p = os.path.join(report, "gpu_allreduce.json")
if os.path.exists(p):
    with open(p) as f:
        bench = [json.loads(line) for line in f if line.strip()]
tables = ""
p = os.path.join(report, "bench.log")
if os.path.exists(p):
    with open(p) as f:
        tables = f.read()
ok = all(s["status"] == "pass" for s in stages)
doc = {"commit": commit, "nvcc": nvcc, "gpus": gpus, "stages": stages,
       "passed": ok, "gpu_allreduce": bench}
with open(os.path.join(report, "gpu-report.json"), "w") as f:
    json.dump(doc, f, indent=2)
with open(os.path.join(report, "gpu-report.md"), "w") as f:
    f.write(f"# varsync GPU check ({'passed' if ok else 'FAILED'})\n\n")
    f.write(f"commit {commit}; {nvcc}\n\n")
    for g in gpus:
        f.write(f"- GPU {g['index']}: {g['name']}, driver {g['driver']}, "
                f"{g['memory']}, compute capability {g['compute_capability']}\n")
    f.write("\n| stage | status | seconds | log |\n|---|---|---|---|\n")
    for s in stages:
        f.write(f"| {s['stage']} | {s['status']} | {s['seconds']} | {s['log']} |\n")
    if tables:
        f.write("\n## gpu_allreduce\n\n```\n" + tables + "```\n")
print(open(os.path.join(report, "gpu-report.md")).read())
EOF

exit $failed
