#!/usr/bin/env bash
# Downloads, on a networked Debian 12 machine, the Debian packages that
# scripts/gpu-check.sh unpacks on a GPU machine that has no network and no
# CAF: CAF 0.17, spdlog, fmt, Catch2 and nlohmann-json (about 3 MB) into
# .gpu-deps/ (git-ignored). Copy that folder along with the working tree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .gpu-deps
cd .gpu-deps
apt-get download libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17 libcaf-dev \
  libspdlog1.10 libspdlog-dev libfmt9 libfmt-dev catch2 nlohmann-json3-dev
ls -l
