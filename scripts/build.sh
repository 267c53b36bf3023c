#!/usr/bin/env bash
# Configures and builds varsync: scripts/build.sh [build-dir] [target...]
# (build-dir defaults to "build", relative to the repository root).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir="${1:-build}"
shift || true

jobs="$(nproc 2>/dev/null || echo 2)"

# Release unless VARSYNC_BUILD_TYPE says otherwise (RelWithDebInfo for a
# debugger).
build_type="${VARSYNC_BUILD_TYPE:-Release}"
echo "build.sh: cmake -S . -B ${build_dir} -G Ninja -DCMAKE_BUILD_TYPE=${build_type}"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${build_type}"

target_args=()
for target in "$@"; do
  target_args+=(--target "$target")
done
echo "build.sh: cmake --build ${build_dir} --parallel ${jobs} ${target_args[*]}"
cmake --build "$build_dir" --parallel "$jobs" "${target_args[@]}"
