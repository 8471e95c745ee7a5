#!/usr/bin/env bash
# Installs every Debian package taskgroup needs to build, test and benchmark.
# Quick when everything is already present: apt is only touched when a
# package is missing.
set -euo pipefail

packages=(
  build-essential g++ clang clang-format clang-tidy libclang-rt-14-dev
  meson ninja-build pkg-config cmake ccache
  libboost1.81-dev libboost-json1.81-dev
  catch2 libbenchmark-dev libtbb-dev
  libcli11-dev graphviz
  libopenmpi-dev openmpi-bin
  iproute2 util-linux
  python3 python3-prometheus-client
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
