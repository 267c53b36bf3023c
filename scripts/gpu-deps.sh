#!/usr/bin/env bash
# Downloads, on a networked Debian 12 machine, the Debian packages that
# `scripts/gpu-check.sh --build` (the fallback that builds on the GPU
# machine) unpacks there when it has no network and no CAF: CAF 0.17,
# spdlog, fmt, Catch2, nlohmann-json, Gloo (the cross-process transport and
# the multi-process GPU rule tables) with its libraries, and Google
# Benchmark (about 6 MB) into .gpu-deps/ (git-ignored). Carry that folder
# with the working tree. The default path needs none of this: it runs what
# scripts/gpu-bundle.sh built here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .gpu-deps
cd .gpu-deps
apt-get download libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17 libcaf-dev \
  libspdlog1.10 libspdlog-dev libfmt9 libfmt-dev catch2 nlohmann-json3-dev \
  libgloo0 libgloo-dev libhiredis0.14 libhiredis-dev libibverbs1 \
  libibverbs-dev libnl-3-200 libnl-route-3-200 \
  libbenchmark1debian libbenchmark-dev
ls -l
