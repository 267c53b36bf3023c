#!/usr/bin/env bash
# Builds and tests varsync under sanitizers (docs/sanitizers-and-fuzzing.md):
#
#   scripts/test-sanitizers.sh [asan|tsan|all]     (default: all)
#
#   asan  build-asan, clang++ -DVARSYNC_SANITIZE=address,undefined
#         -DVARSYNC_BUILD_FUZZERS=ON: the WHOLE suite (except the Python
#         interop test, which downloads from PyPI) plus one replay of every
#         committed fuzz corpus; the same directory holds the fuzz targets
#         that scripts/fuzz.sh runs with FUZZ_BUILD_DIR=build-asan (CI)
#   tsan  build-tsan, g++ -DVARSYNC_SANITIZE=thread: the concurrency and load
#         tests (ctest -R "$VARSYNC_TSAN_TESTS"), linked against a
#         TSan-instrumented libcaf_core (see below); only the test
#         executables that hold them are built
#
# ThreadSanitizer only sees synchronization in instrumented code. Debian's
# libcaf_core is not instrumented, so every message handed from one actor to
# another through CAF's lock-free mailboxes and scheduler queues looks like a
# data race (hundreds of reports per test, most of them in varsync frames).
# The tsan step therefore builds CAF's core library from the Debian source
# package of the installed libcaf-dev (same upstream version) with
# -fsanitize=thread into build-tsan/caf/install once (about 2-3 minutes on
# 2 cores; reused while it exists) and links build-tsan against it. The source
# comes through apt with a private deb-src list, so the machine needs no
# deb-src entry of its own. VARSYNC_TSAN_CAF_PREFIX=<dir> uses an
# instrumented CAF installed elsewhere (<dir>/include, <dir>/lib/libcaf_core.so).
#
# Any sanitizer report fails the run (halt_on_error=1, UBSan without
# recovery). The host build is checked: VARSYNC_CUDA defaults to OFF here
# (ASan and the CUDA runtime need ASAN_OPTIONS=protect_shadow_gap=0).
# Builds use -O1 -g1 (SAN_CXX_FLAGS): faster to compile than -O2 -g, and
# sanitizer stacks still name every frame and line.
# Environment: JOBS (build parallelism, default: nproc),
# VARSYNC_TSAN_TESTS (the TSan test regex), VARSYNC_TSAN_TARGETS (what the
# tsan step builds), VARSYNC_ASAN_EXCLUDE (ctest -E regex of the asan step),
# CTEST_ARGS (extra ctest args).
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
tsan_tests="${VARSYNC_TSAN_TESTS:-W8|load|concurren|admission|replica failure|deadlines|V2:|V3:|X2:|X3:|M3:|M6: the HTTP|shutdown:|blocking calls|local_add}"
read -r -a tsan_targets <<<"${VARSYNC_TSAN_TARGETS:-semantics_tests reliability_tests actor_tests}"
asan_exclude="${VARSYNC_ASAN_EXCLUDE:-^interop\.}"
san_cxx_flags="${SAN_CXX_FLAGS:--O1 -g1 -DNDEBUG}"
read -r -a extra_ctest_args <<<"${CTEST_ARGS:-}"

# libFuzzer (for the fuzz targets in build-asan) is in libclang-rt-14-dev,
# which Debian's clang only recommends.
if [[ "$what" == "tsan" ]]; then
  bash scripts/setup.sh
else
  bash scripts/setup.sh clang libclang-rt-14-dev
fi

# Symbolized stacks: the sanitizers find llvm-symbolizer on PATH if it is
# there, addr2line otherwise; nothing else is needed.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:print_summary=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:print_summary=1:suppressions=${root}/tests/sanitizers/ubsan.supp"
export LSAN_OPTIONS="print_suppressions=0:suppressions=${root}/tests/sanitizers/lsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:print_suppressions=0:suppressions=${root}/tests/sanitizers/tsan.supp"

configure() { # dir sanitizer [extra cmake args...]
  local dir="$1" san="$2"
  shift 2
  local args=(-S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
              "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${san_cxx_flags}"
              -DVARSYNC_SANITIZE="$san" -DVARSYNC_BUILD_TESTS=ON
              -DVARSYNC_BUILD_BENCH=OFF -DVARSYNC_CUDA="${VARSYNC_CUDA:-OFF}" "$@")
  echo "test-sanitizers.sh: cmake ${args[*]}"
  cmake "${args[@]}"
}

build() { # dir [target...]
  local dir="$1"
  shift
  local targets=()
  for t in "$@"; do
    targets+=(--target "$t")
  done
  echo "test-sanitizers.sh: cmake --build ${dir} --parallel ${jobs} ${targets[*]}"
  cmake --build "$dir" --parallel "$jobs" "${targets[@]}"
}

# Prints the prefix of a TSan-instrumented libcaf_core, building it first if
# needed (see the top of this file). Progress goes to stderr.
tsan_caf_prefix() {
  if [[ -n "${VARSYNC_TSAN_CAF_PREFIX:-}" ]]; then
    if [[ ! -f "${VARSYNC_TSAN_CAF_PREFIX}/lib/libcaf_core.so" ]]; then
      echo "test-sanitizers.sh: no lib/libcaf_core.so under VARSYNC_TSAN_CAF_PREFIX=${VARSYNC_TSAN_CAF_PREFIX}" >&2
      return 1
    fi
    echo "$VARSYNC_TSAN_CAF_PREFIX"
    return 0
  fi
  local dir="${root}/build-tsan/caf"
  local prefix="${dir}/install"
  if [[ -f "${prefix}/lib/libcaf_core.so" ]]; then
    echo "$prefix"
    return 0
  fi
  local src_pkg src_ver upstream
  src_pkg="$(dpkg-query -W -f='${source:Package}' libcaf-dev)"
  src_ver="$(dpkg-query -W -f='${source:Version}' libcaf-dev)"
  upstream="$(dpkg-query -W -f='${source:Upstream-Version}' libcaf-dev)"
  local tarball="${dir}/${src_pkg}_${upstream}.orig.tar.gz"
  mkdir -p "${dir}/apt/lists/partial"
  if [[ ! -f "$tarball" ]]; then
    # The Debian source package of the installed version, through apt with a
    # private deb-src list (the system's apt configuration is not touched).
    local codename
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")"
    local key="[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]"
    {
      echo "deb-src ${key} http://deb.debian.org/debian ${codename} main"
      echo "deb-src ${key} http://deb.debian.org/debian ${codename}-updates main"
      echo "deb-src ${key} http://deb.debian.org/debian-security ${codename}-security main"
    } >"${dir}/apt/sources.list"
    local apt_opts=(-o "Dir::Etc::SourceList=${dir}/apt/sources.list"
                    -o "Dir::Etc::SourceParts=/dev/null"
                    -o "Dir::State::Lists=${dir}/apt/lists"
                    -o "Debug::NoLocking=1"
                    -o "APT::Sandbox::User=$(id -un)")
    echo "test-sanitizers.sh: [tsan] fetching the source of ${src_pkg} ${src_ver} (apt-get source)" >&2
    # A suite that cannot be reached is not fatal if another has the package.
    apt-get "${apt_opts[@]}" update >&2 || true
    # Only the upstream tarball is needed; a missing Debian diff is fine
    # (deb.debian.org answered 404 for it here).
    (cd "$dir" && apt-get "${apt_opts[@]}" source --download-only \
       "${src_pkg}=${src_ver}" >&2) || true
    if [[ ! -f "$tarball" ]]; then
      echo "test-sanitizers.sh: could not download ${tarball##*/}" >&2
      return 1
    fi
    # apt checked the tarball against the signed index; check it again
    # against the .dsc in case it came from an earlier, interrupted run.
    local want
    want="$(awk '/^Checksums-Sha256:/{f=1;next} f&&/^ /{print $1, $3} f&&!/^ /{f=0}' \
            "${dir}/${src_pkg}_${src_ver}.dsc" | awk -v t="${tarball##*/}" '$2==t{print $1}')"
    if [[ -z "$want" || "$(sha256sum "$tarball" | cut -d' ' -f1)" != "$want" ]]; then
      echo "test-sanitizers.sh: checksum mismatch for ${tarball##*/}" >&2
      rm -f "$tarball"
      return 1
    fi
  fi
  rm -rf "${dir}/src" "${dir}/build"
  mkdir -p "${dir}/src"
  tar xzf "$tarball" -C "${dir}/src" --strip-components=1
  echo "test-sanitizers.sh: [tsan] building libcaf_core ${upstream} with -fsanitize=thread" >&2
  cmake -S "${dir}/src" -B "${dir}/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${san_cxx_flags}" \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_OPENSSL=yes \
    -DCAF_NO_TOOLS=yes -DCAF_NO_PYTHON=yes -DCAF_NO_OPENCL=yes -DCAF_NO_IO=yes \
    -DCAF_NO_SUMMARY=yes -DCAF_LOG_LEVEL=QUIET >&2
  cmake --build "${dir}/build" --parallel "$jobs" --target libcaf_core_shared >&2
  cmake --install "${dir}/build" --prefix "$prefix" >&2
  echo "$prefix"
}

status=0
summary=()

run_asan() {
  local t0 t1 t2 rc=0
  t0=$(date +%s)
  local cxx
  cxx="$(command -v clang++)"
  configure build-asan "address,undefined" -DCMAKE_CXX_COMPILER="$cxx" \
    -DVARSYNC_BUILD_FUZZERS=ON -DVARSYNC_BUILD_EXAMPLES=ON
  build build-asan
  t1=$(date +%s)
  echo "test-sanitizers.sh: [asan] ctest --test-dir build-asan --output-on-failure -j2 --timeout 900 -E '${asan_exclude}'"
  ctest --test-dir build-asan --output-on-failure -j2 --timeout 900 \
    -E "$asan_exclude" "${extra_ctest_args[@]}" || rc=$?
  t2=$(date +%s)
  summary+=("asan+ubsan: build $((t1 - t0)) s, all tests $((t2 - t1)) s, ctest status ${rc}")
  [[ $rc -eq 0 ]] || status=$rc
}

run_tsan() {
  local t0 t1 t2 rc=0
  t0=$(date +%s)
  local caf_prefix
  caf_prefix="$(tsan_caf_prefix)"
  local tc=$(date +%s)
  summary+=("tsan: instrumented libcaf_core ready in $((tc - t0)) s (${caf_prefix})")
  # The headers of the instrumented build are those of libcaf-dev; the
  # library replaces Debian's (RPATH of every test binary).
  configure build-tsan "thread" -DVARSYNC_BUILD_EXAMPLES=OFF \
    -DVARSYNC_BUILD_FUZZERS=OFF \
    -DCAF_INCLUDE_DIR="${caf_prefix}/include" \
    -DCAF_CORE_LIBRARY="${caf_prefix}/lib/libcaf_core.so"
  build build-tsan "${tsan_targets[@]}"
  local libs
  libs="$(ldd build-tsan/tests/semantics_tests)"
  if [[ "$libs" != *"${caf_prefix}/lib/libcaf_core"* ]]; then
    echo "test-sanitizers.sh: [tsan] the tests do not load ${caf_prefix}/lib/libcaf_core.so" >&2
    ldd build-tsan/tests/semantics_tests | grep caf >&2 || true
    status=1
    return
  fi
  t1=$(date +%s)
  echo "test-sanitizers.sh: [tsan] tests matching '${tsan_tests}':"
  # Listed into a variable first: `ctest | grep -q` fails under pipefail when
  # grep exits at the first match and ctest gets SIGPIPE.
  local listing
  listing="$(ctest --test-dir build-tsan -N -R "$tsan_tests" | grep -E "Test +#" || true)"
  echo "$listing"
  if [[ -z "$listing" ]]; then
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
