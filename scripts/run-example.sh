#!/usr/bin/env bash
# Builds and runs one example: scripts/run-example.sh [example=training] [args...]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

example="${1:-training}"
shift || true

bash scripts/setup.sh
bash scripts/build.sh build "$example"

binary="build/examples/${example}"
if [[ ! -x "$binary" ]]; then
  echo "run-example.sh: no executable ${binary} (unknown example '${example}'?)" >&2
  exit 1
fi
echo "run-example.sh: ${binary} $*"
exec "$binary" "$@"
