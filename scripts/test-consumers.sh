#!/usr/bin/env bash
# The consumer stage of CI: builds tiny external programs against varsync the
# three ways a project uses it, runs each (it checks values and exits 0 only
# if they are right) and checks that none depends on libcudart or libnccl.
#   1. find_package(varsync) against a fresh install prefix (shared library)
#   2. the same against a static install (scripts/test.sh's build, if any)
#   3. pkg-config only, a one-file program
#   4. add_subdirectory of the source tree
#   5. find_package(varsync COMPONENTS cuda), where the CUDA backend is built
#   6. find_package(varsync COMPONENTS distributed), run by the installed
#      varsync-run over two processes, where Gloo is built
# Also checks that the installed include tree holds only include/varsync/
# (with its ext/ and internal/ folders).
# Usage: scripts/test-consumers.sh [work-dir]   (default: a temporary dir)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
src="$(pwd)"

bash scripts/setup.sh pkg-config

work="${1:-}"
if [[ -z "$work" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
jobs="$(nproc 2>/dev/null || echo 2)"
consumers="$src/tests/consumers"

step() { echo "test-consumers.sh: $*"; }

no_gpu_libs() {
  local bin="$1" deps
  deps="$(ldd "$bin")"
  if [[ "$deps" == *libcudart* || "$deps" == *libnccl* ]]; then
    echo "test-consumers.sh: FAIL: $bin depends on CUDA/NCCL:" >&2
    echo "$deps" >&2
    exit 1
  fi
  step "$(basename "$bin"): no libcudart/libnccl dependency"
}

only_public_headers() {
  local prefix="$1" extra
  extra="$(cd "$prefix/include" && find . -mindepth 1 -maxdepth 1 ! -name varsync)"
  if [[ -n "$extra" ]]; then
    echo "test-consumers.sh: FAIL: $prefix/include holds more than varsync/: $extra" >&2
    exit 1
  fi
  extra="$(cd "$prefix/include/varsync" && find . -mindepth 1 -type d \
            ! -name ext ! -name internal)"
  if [[ -n "$extra" ]]; then
    echo "test-consumers.sh: FAIL: subfolders under $prefix/include/varsync: $extra" >&2
    exit 1
  fi
  step "$prefix/include: only varsync/ ($(find "$prefix/include/varsync" -name '*.hpp' | wc -l) headers)"
}

build_consumer() {  # name source-dir build-dir [cmake args...]
  local name="$1" dir="$2" build="$3"
  shift 3
  step "$name: configure and build"
  cmake -S "$dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$build.log" 2>&1 \
    || { cat "$build.log"; exit 1; }
  cmake --build "$build" --parallel "$jobs" >>"$build.log" 2>&1 \
    || { cat "$build.log"; exit 1; }
}

# 1. Shared library, library only (a consumer's install), host-only.
shared="$work/prefix-shared"
step "shared library: build and install to $shared"
cmake -S "$src" -B "$work/lib-shared" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=ON -DVARSYNC_BUILD_TESTS=OFF -DVARSYNC_BUILD_EXAMPLES=OFF \
  -DVARSYNC_CUDA=OFF >"$work/lib-shared.log" 2>&1 || { cat "$work/lib-shared.log"; exit 1; }
cmake --build "$work/lib-shared" --parallel "$jobs" >>"$work/lib-shared.log" 2>&1 \
  || { cat "$work/lib-shared.log"; exit 1; }
cmake --install "$work/lib-shared" --prefix "$shared" >>"$work/lib-shared.log" 2>&1
only_public_headers "$shared"
build_consumer find_package "$consumers/find_package" "$work/find_package" \
  -DCMAKE_PREFIX_PATH="$shared"
"$work/find_package/consumer"
no_gpu_libs "$work/find_package/consumer"

# 2. Static library: scripts/test.sh's build (it has the CUDA backend too when
# nvcc and NCCL are there), or a library-only static build.
static="$work/prefix-static"
if [[ -f build/CMakeCache.txt ]]; then
  step "static library: install scripts/test.sh's build to $static"
  cmake --install build --prefix "$static" >"$work/lib-static.log" 2>&1
else
  step "static library: build and install to $static"
  cmake -S "$src" -B "$work/lib-static" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DVARSYNC_BUILD_TESTS=OFF -DVARSYNC_BUILD_EXAMPLES=OFF >"$work/lib-static.log" 2>&1
  cmake --build "$work/lib-static" --parallel "$jobs" >>"$work/lib-static.log" 2>&1
  cmake --install "$work/lib-static" --prefix "$static" >>"$work/lib-static.log" 2>&1
fi
only_public_headers "$static"
build_consumer find_package_static "$consumers/find_package" "$work/find_package_static" \
  -DCMAKE_PREFIX_PATH="$static"
"$work/find_package_static/consumer"
no_gpu_libs "$work/find_package_static/consumer"

# 3. pkg-config only.
step "pkg-config: $(PKG_CONFIG_PATH="$shared/lib/pkgconfig" pkg-config --cflags --libs varsync)"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -o "$work/consumer_pkg_config" "$consumers/main.cpp" \
  $(PKG_CONFIG_PATH="$shared/lib/pkgconfig" pkg-config --cflags --libs varsync)
LD_LIBRARY_PATH="$shared/lib" "$work/consumer_pkg_config"
LD_LIBRARY_PATH="$shared/lib" no_gpu_libs "$work/consumer_pkg_config"

# 4. add_subdirectory of the source tree (CUDA off there unless asked for).
build_consumer add_subdirectory "$consumers/add_subdirectory" "$work/add_subdirectory" \
  -DVARSYNC_SOURCE_DIR="$src"
"$work/add_subdirectory/consumer"
no_gpu_libs "$work/add_subdirectory/consumer"
if [[ -e "$work/add_subdirectory/varsync/tests" || -e "$work/add_subdirectory/varsync/examples" ]]; then
  echo "test-consumers.sh: FAIL: add_subdirectory built varsync's tests or examples" >&2
  exit 1
fi
step "add_subdirectory: no tests, examples or benchmarks built"

# 5. The CUDA component, where the static install has it.
if [[ -f "$static/lib/cmake/varsync/varsyncCudaTargets.cmake" ]]; then
  build_consumer cuda_component "$consumers/cuda_component" "$work/cuda_component" \
    -DCMAKE_PREFIX_PATH="$static"
  "$work/cuda_component/consumer_cuda"
else
  step "cuda_component: skipped, this build has no CUDA backend"
fi

# 6. The distributed component and the launcher, where the static install
# has them: two processes on loopback.
if [[ -f "$static/lib/cmake/varsync/varsyncDistributedTargets.cmake" ]]; then
  build_consumer distributed "$consumers/distributed" "$work/distributed" \
    -DCMAKE_PREFIX_PATH="$static"
  timeout 120 "$static/bin/varsync-run" -np 2 --timeout-ms 20000 \
    "$work/distributed/consumer_distributed"
  no_gpu_libs "$work/distributed/consumer_distributed"
else
  step "distributed: skipped, this build has no Gloo transport"
fi

echo "test-consumers.sh: 6 consumers passed"
