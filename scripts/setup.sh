#!/usr/bin/env bash
# Installs what building and testing varsync need on a fresh Debian 12
# machine. Idempotent: a machine that has every package does no apt work and
# needs no network. Extra package names given as arguments are installed too
# (the sanitizer and fuzz scripts pass clang and libclang-rt-14-dev).
set -euo pipefail

packages=(g++ cmake ninja-build make libcaf-dev libspdlog-dev catch2
          nlohmann-json3-dev libgloo-dev ca-certificates git python3 python3-venv
          pkg-config doxygen iproute2 etcd-server "$@")

missing=()
for pkg in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup.sh: all packages present (${packages[*]}); nothing to install"
  exit 0
fi

echo "setup.sh: missing packages: ${missing[*]}"

as_root=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup.sh: not root and sudo is not available; install as root:" >&2
    echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "setup.sh: apt-get update"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
echo "setup.sh: apt-get install -y --no-install-recommends ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
echo "setup.sh: done"
