#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with Clang (ASan + UBSan) in
# build-fuzz and runs each for a fixed time on a copy of its seed corpus:
#
#   scripts/fuzz.sh [seconds-per-target=60] [target...]
#
# Targets: parse_enums parse_device variable_spec deserialize safetensors config
# (default: all). Environment: FUZZ_PARALLEL (targets run at once, default 1),
# JOBS (build parallelism, default nproc), FUZZ_ARGS (extra libFuzzer flags),
# FUZZ_BUILD_DIR (a build directory already configured with
# VARSYNC_BUILD_FUZZERS=ON, such as test-sanitizers.sh's build-asan, used
# instead of configuring build-fuzz: CI builds the library once for both),
# FUZZ_WORK (work directory, default <build dir>/fuzz-work).
#
# Each target runs with -max_total_time=<seconds> -rss_limit_mb=2048
# -timeout=10 on FUZZ_WORK/<target>/corpus (the committed seeds of
# fuzz/corpus/<target> plus what earlier runs found there); crash, leak, OOM
# and timeout reproducers go to FUZZ_WORK/<target>/artifacts/. Exits non-zero
# if any target finds something (or fails to build or start).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

seconds="${1:-60}"
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: $0 [seconds-per-target=60] [target...]" >&2
  exit 2
fi
all_targets=(parse_enums parse_device variable_spec deserialize safetensors config)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  if [[ " ${all_targets[*]} " != *" $t "* ]]; then
    echo "fuzz.sh: unknown target '$t' (one of: ${all_targets[*]})" >&2
    exit 2
  fi
done

jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
parallel="${FUZZ_PARALLEL:-1}"
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
work="${FUZZ_WORK:-${build_dir}/fuzz-work}"
read -r -a extra_args <<<"${FUZZ_ARGS:-}"

# -- tools ---------------------------------------------------------------------
# libFuzzer ships in libclang-rt-14-dev, which Debian's clang only recommends.
bash scripts/setup.sh clang libclang-rt-14-dev
cxx="${FUZZ_CXX:-$(command -v clang++ || true)}"
if [[ -z "$cxx" ]]; then
  echo "fuzz.sh: clang++ not found" >&2
  exit 1
fi

# -- build ---------------------------------------------------------------------
if [[ -z "${FUZZ_BUILD_DIR:-}" ]]; then
  echo "fuzz.sh: cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=${cxx} -DVARSYNC_BUILD_FUZZERS=ON -DVARSYNC_SANITIZE=address,undefined"
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$cxx" -DVARSYNC_BUILD_FUZZERS=ON \
    -DVARSYNC_SANITIZE=address,undefined -DVARSYNC_BUILD_TESTS=OFF \
    -DVARSYNC_BUILD_EXAMPLES=OFF -DVARSYNC_BUILD_BENCH=OFF -DVARSYNC_CUDA=OFF
elif ! grep -q '^VARSYNC_BUILD_FUZZERS:BOOL=ON' "${build_dir}/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz.sh: FUZZ_BUILD_DIR=${build_dir} is not configured with VARSYNC_BUILD_FUZZERS=ON" >&2
  exit 1
fi
build_targets=()
for t in "${targets[@]}"; do
  build_targets+=(--target "${t}_fuzzer")
done
echo "fuzz.sh: cmake --build ${build_dir} --parallel ${jobs} ${build_targets[*]}"
cmake --build "$build_dir" --parallel "$jobs" "${build_targets[@]}"

# -- run -----------------------------------------------------------------------
# Symbolized reports; leaks are checked by libFuzzer after each input.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0:print_summary=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1:suppressions=${root}/tests/sanitizers/ubsan.supp"

run_one() { # target -> exit status
  local t="$1" dir="${work}/$1"
  # Reproducers of an earlier run are kept in artifacts.previous.
  if [[ -d "${dir}/artifacts" ]]; then
    rm -rf "${dir}/artifacts.previous"
    mv "${dir}/artifacts" "${dir}/artifacts.previous"
  fi
  mkdir -p "${dir}/corpus" "${dir}/artifacts"
  cp -n "fuzz/corpus/${t}/"* "${dir}/corpus/" 2>/dev/null || true
  local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10
              -print_final_stats=1 -artifact_prefix="${dir}/artifacts/")
  [[ -f "fuzz/${t}.dict" ]] && args+=(-dict="fuzz/${t}.dict")
  local rc=0
  "${build_dir}/fuzz/${t}_fuzzer" "${args[@]}" "${extra_args[@]}" \
    "${dir}/corpus" >"${dir}/fuzz.log" 2>&1 || rc=$?
  echo "$rc" >"${dir}/status"
  return 0
}

echo "fuzz.sh: running ${targets[*]} for ${seconds} s each, ${parallel} at a time (logs: ${work}/<target>/fuzz.log)"
start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  rm -f "${work}/${t}/status"
  run_one "$t" &
  running=$((running + 1))
  if [[ $running -ge $parallel ]]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
elapsed=$(( $(date +%s) - start ))

status=0
for t in "${targets[@]}"; do
  dir="${work}/${t}"
  rc="$(cat "${dir}/status" 2>/dev/null || echo 1)"
  done_line="$(grep -E '^#[0-9]+[[:space:]]+DONE' "${dir}/fuzz.log" | tail -1 || true)"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "${dir}/fuzz.log" | tail -1)"
  cov="$(sed -n 's/.*DONE *cov: *\([0-9]*\) *ft: *\([0-9]*\).*/cov \1, ft \2/p' "${dir}/fuzz.log" | tail -1)"
  corpus="$(find "${dir}/corpus" -type f | wc -l)"
  findings="$(find "${dir}/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) 2>/dev/null | tr '\n' ' ')"
  if [[ "$rc" -ne 0 || -n "$findings" || -z "$done_line" ]]; then
    status=1
    echo "fuzz.sh: ${t}: FAILED (libFuzzer status ${rc}); last lines of ${dir}/fuzz.log:"
    tail -n 40 "${dir}/fuzz.log" | sed 's/^/    /'
    [[ -z "$findings" ]] || echo "fuzz.sh: ${t}: reproducers: ${findings}"
  else
    echo "fuzz.sh: ${t}: ok: ${execs:-?} executions, ${cov:-cov ?}, corpus ${corpus} files"
  fi
done
echo "fuzz.sh: ${#targets[@]} targets in ${elapsed} s; exit status ${status}"
exit "$status"
