#!/usr/bin/env bash
# Creates build/pyenv (a Python venv with safetensors and numpy) for the K4
# interop test. Exits 77 ("skipped") when the venv cannot be created or PyPI
# is unreachable. Usage: scripts/python-env.sh [VENV_DIR]
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$here/build/pyenv}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import safetensors.numpy, numpy" 2>/dev/null; then
  exit 0
fi
if ! python3 -m venv "$venv" >/dev/null 2>&1; then
  echo "python-env: cannot create a venv (install python3-venv); skipping" >&2
  rm -rf "$venv"
  exit 77
fi
if ! timeout 300 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
     --timeout 20 --retries 1 safetensors numpy >&2; then
  echo "python-env: cannot install safetensors / numpy (PyPI unreachable?); skipping" >&2
  exit 77
fi
"$venv/bin/python" -c "import safetensors.numpy, numpy" || exit 77
