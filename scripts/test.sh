#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite; exits with
# ctest's status.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
bash scripts/build.sh build

echo "test.sh: ctest --test-dir build --output-on-failure -j2 --timeout 600"
status=0
ctest --test-dir build --output-on-failure -j2 --timeout 600 || status=$?
echo "test.sh: ctest exited with status ${status}"
exit "$status"
