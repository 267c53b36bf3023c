#!/usr/bin/env bash
# Builds and tests varsync under sanitizers (docs/sanitizers-and-fuzzing.md):
#
#   scripts/test-sanitizers.sh [asan|tsan|all]     (default: all)
#
#   asan  build-asan, -DVARSYNC_SANITIZE=address,undefined: the WHOLE suite
#   tsan  build-tsan, -DVARSYNC_SANITIZE=thread: the concurrency and load tests
#         (ctest -R "$VARSYNC_TSAN_TESTS", default "W8|load|concurren")
#
# Any sanitizer report fails the run (halt_on_error=1, UBSan without
# recovery). The host build is checked: VARSYNC_CUDA defaults to OFF here
# (ASan and the CUDA runtime need ASAN_OPTIONS=protect_shadow_gap=0).
# Environment: JOBS (build parallelism, default: nproc),
# VARSYNC_TSAN_TESTS (the TSan test regex), CTEST_ARGS (extra ctest args).
# Exits non-zero if a build fails, a test fails or a sanitizer reports.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

what="${1:-all}"
case "$what" in
  asan | tsan | all) ;;
  *)
    echo "usage: $0 [asan|tsan|all]" >&2
    exit 2
    ;;
esac

jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
tsan_tests="${VARSYNC_TSAN_TESTS:-W8|load|concurren}"
read -r -a extra_ctest_args <<<"${CTEST_ARGS:-}"

bash scripts/setup.sh

# Symbolized stacks: the sanitizers find llvm-symbolizer on PATH if it is
# there, addr2line otherwise; nothing else is needed.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:print_summary=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1:suppressions=${root}/tests/sanitizers/ubsan.supp"
export LSAN_OPTIONS="print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:print_suppressions=0:suppressions=${root}/tests/sanitizers/tsan.supp"

configure_and_build() { # dir sanitizer
  local dir="$1" san="$2"
  echo "test-sanitizers.sh: cmake -S . -B ${dir} -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVARSYNC_SANITIZE=${san}"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVARSYNC_SANITIZE="$san" -DVARSYNC_BUILD_TESTS=ON \
    -DVARSYNC_BUILD_EXAMPLES=ON -DVARSYNC_BUILD_FUZZERS=OFF \
    -DVARSYNC_CUDA="${VARSYNC_CUDA:-OFF}"
  echo "test-sanitizers.sh: cmake --build ${dir} --parallel ${jobs}"
  cmake --build "$dir" --parallel "$jobs"
}

status=0
summary=()

run_asan() {
  local t0 t1 t2 rc=0
  t0=$(date +%s)
  configure_and_build build-asan "address,undefined"
  t1=$(date +%s)
  echo "test-sanitizers.sh: [asan] ctest --test-dir build-asan --output-on-failure -j2 --timeout 900"
  ctest --test-dir build-asan --output-on-failure -j2 --timeout 900 \
    "${extra_ctest_args[@]}" || rc=$?
  t2=$(date +%s)
  summary+=("asan+ubsan: build $((t1 - t0)) s, all tests $((t2 - t1)) s, ctest status ${rc}")
  [[ $rc -eq 0 ]] || status=$rc
}

run_tsan() {
  local t0 t1 t2 rc=0
  t0=$(date +%s)
  configure_and_build build-tsan "thread"
  t1=$(date +%s)
  echo "test-sanitizers.sh: [tsan] tests matching '${tsan_tests}':"
  ctest --test-dir build-tsan -N -R "$tsan_tests" | grep -E "Test +#" || true
  if ! ctest --test-dir build-tsan -N -R "$tsan_tests" | grep -qE "Test +#"; then
    echo "test-sanitizers.sh: [tsan] no test matches '${tsan_tests}'" >&2
    rc=1
  else
    echo "test-sanitizers.sh: [tsan] ctest --test-dir build-tsan --output-on-failure -j1 --timeout 1200 -R '${tsan_tests}'"
    # -j1: the concurrency tests spawn their own threads; TSan slows them ~10x.
    ctest --test-dir build-tsan --output-on-failure -j1 --timeout 1200 \
      -R "$tsan_tests" "${extra_ctest_args[@]}" || rc=$?
  fi
  t2=$(date +%s)
  summary+=("tsan: build $((t1 - t0)) s, tests $((t2 - t1)) s, ctest status ${rc}")
  [[ $rc -eq 0 ]] || status=$rc
}

case "$what" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all)
    run_asan
    run_tsan
    ;;
esac

for line in "${summary[@]}"; do
  echo "test-sanitizers.sh: ${line}"
done
echo "test-sanitizers.sh: exit status ${status}"
exit "$status"
