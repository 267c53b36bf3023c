#!/usr/bin/env bash
# The sanitizer and fuzz stages of CI (.ci/run runs scripts/test.sh first):
#
#   scripts/ci.sh [stage...]      stages: asan fuzz tsan (default: all three)
#
#   asan  scripts/test-sanitizers.sh asan: clang ASan+UBSan build-asan, the
#         whole suite (without the PyPI-dependent interop test) and one
#         replay of every committed fuzz corpus
#   fuzz  scripts/fuzz.sh with FUZZ_BUILD_DIR=build-asan: every fuzz target
#         for CI_FUZZ_SECONDS (default 20) on its committed corpus, reusing
#         the ASan+UBSan library of the asan stage
#   tsan  scripts/test-sanitizers.sh tsan: TSan-instrumented libcaf_core, the
#         concurrency, load, admission and failure tests
#
# Prints each stage's duration and exits non-zero if any stage fails (a
# failed build or test, any sanitizer report, any fuzz finding). Every stage
# runs even after an earlier one failed, so one CI run shows all problems.
# JOBS defaults to 2 (the CI machine has 2 cores).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

export JOBS="${JOBS:-2}"
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(asan fuzz tsan)

# CPU seconds (user + sys) of every finished child so far: on a shared
# machine, wall time says little about what a dedicated CI runner needs.
# (`times` must run in this shell, not in a subshell: hence the file.)
times_file="$(mktemp)"
trap 'rm -f "$times_file"' EXIT
child_cpu() { # sets cpu_now
  times >"$times_file"
  cpu_now=$(awk 'function sec(x,  m) {
      m = x; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", x); sub(/s$/, "", x);
      return m * 60 + x }
    NR == 2 { printf "%d", sec($1) + sec($2) }' "$times_file")
}

status=0
report=()
start_all=$(date +%s)
for stage in "${stages[@]}"; do
  t0=$(date +%s)
  child_cpu
  c0=$cpu_now
  echo "ci.sh: === stage ${stage} ==="
  rc=0
  case "$stage" in
    asan) bash scripts/test-sanitizers.sh asan || rc=$? ;;
    fuzz)
      FUZZ_BUILD_DIR=build-asan FUZZ_PARALLEL="${FUZZ_PARALLEL:-1}" \
        bash scripts/fuzz.sh "${CI_FUZZ_SECONDS:-20}" || rc=$?
      ;;
    tsan) bash scripts/test-sanitizers.sh tsan || rc=$? ;;
    *)
      echo "ci.sh: unknown stage '${stage}' (asan, fuzz, tsan)" >&2
      rc=2
      ;;
  esac
  t1=$(date +%s)
  child_cpu
  c1=$cpu_now
  report+=("$(printf '%-5s %5d s wall, %5d s CPU  %s' "$stage" $((t1 - t0)) $((c1 - c0)) "$([[ $rc -eq 0 ]] && echo ok || echo "FAILED (status ${rc})")")")
  [[ $rc -eq 0 ]] || status=1
done

echo "ci.sh: stage durations:"
for line in "${report[@]}"; do
  echo "ci.sh:   ${line}"
done
echo "ci.sh: total $(( $(date +%s) - start_all )) s; exit status ${status}"
exit "$status"
