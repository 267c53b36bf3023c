#!/usr/bin/env bash
# Builds, here (no GPU needed: the CUDA toolkit and NCCL are enough), what a
# GPU machine runs, and packs it for scripts/gpu-check.sh, whose default
# path then spends no device time on building:
#
#   scripts/gpu-bundle.sh [--build-dir DIR] [--arch 90-real]
#
# Result: .gpu/ at the repository root (git-ignored; carry it with the
# working tree), about 45 MB: the GPU test binaries, the rank program of
# the two-process NCCL tests, the examples and the GPU benchmark (stripped)
# at their build-tree paths under .gpu/tree/, their CTest files, and every
# shared library they need except glibc's, libstdc++/libgcc (the GPU
# machine's are newer), the CUDA driver and NCCL, which the GPU machine has.
# It checks that every binary starts here and lists its tests, and that
# nothing but the driver and NCCL is left unresolved.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
build_dir="build-gpu"
arch="90-real" # H100 and H200
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

targets=(gpu_tests nccl_rank gpu_semantics_tests cuda_step gpu_allreduce
         reliability_tests)
binaries=(tests/gpu/gpu_tests tests/gpu/nccl_rank tests/gpu/gpu_semantics_tests
          examples/cuda_step bench/gpu/gpu_allreduce tests/reliability_tests)

bash scripts/setup.sh >/dev/null
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DVARSYNC_CUDA=ON -DVARSYNC_GLOO=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DVARSYNC_BUILD_BENCH=OFF
fi
cmake --build "$build_dir" --target "${targets[@]}"
build="$(cd "$build_dir" && pwd)"

dst="$root/.gpu"
rm -rf "$dst"
mkdir -p "$dst/tree" "$dst/lib"
# The CTest files name this machine's paths; gpu-once.sh rewrites them.
(cd "$build" && find . \( -name CTestTestfile.cmake -o -name '*_tests-*.cmake' \
   -o -name '*_include-*.cmake' \) -print0 | tar --null -T - -cf -) |
  tar -C "$dst/tree" -xf -
printf 'OLD_BUILD=%s\nOLD_SRC=%s\n' "$build" "$root" >"$dst/paths.env"
for f in "${binaries[@]}"; do
  [[ -x "$build/$f" ]] || { echo "gpu-bundle.sh: $build/$f was not built" >&2; exit 1; }
  mkdir -p "$dst/tree/$(dirname "$f")"
  strip -o "$dst/tree/$f" "$build/$f"
done
for f in "${binaries[@]}"; do ldd "$dst/tree/$f"; done |
  awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*) ;;
      libstdc++*|libgcc_s*|libcuda.so*|libnccl.so*) ;;
      *) cp -L "$path" "$dst/lib/$name" ;;
    esac
  done
git -C "$root" rev-parse --short HEAD >"$dst/commit" 2>/dev/null || echo unknown >"$dst/commit"
git -C "$root" diff --quiet HEAD -- 2>/dev/null || echo "plus uncommitted changes" >>"$dst/commit"

# Checks that cost no GPU time.
for b in gpu_tests gpu_semantics_tests; do
  n=$( (LD_LIBRARY_PATH="$dst/lib" "$dst/tree/tests/gpu/$b" --list-test-names-only || true) | wc -l)
  echo "gpu-bundle.sh: $b lists $n test cases"
  [[ "$n" -gt 0 ]] || { echo "gpu-bundle.sh: $b does not start" >&2; exit 1; }
done
missing=$(for f in "${binaries[@]}"; do LD_LIBRARY_PATH="$dst/lib" ldd "$dst/tree/$f"; done |
  grep "not found" | grep -v -E "libcuda\.so|libnccl\.so" | sort -u || true)
if [[ -n "$missing" ]]; then
  echo "gpu-bundle.sh: unresolved libraries: $missing" >&2
  exit 1
fi
echo "gpu-bundle.sh: $(du -sh "$dst" | cut -f1) in .gpu/ ($(cat "$dst/commit" | tr '\n' ' '))"
