#!/usr/bin/env bash
# Install the Debian packages libfastreduce needs, only those missing.
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      openmpi-bin libopenmpi-dev mpich libmpich-dev
      libucx-dev ucx-utils libhwloc-dev hwloc libcriterion-dev gnuplot-nox
      python3 python3-venv python3-dev
      clang valgrind iproute2 doxygen libmicrohttpd-dev prometheus)
[ "${FR_DEPS_EXTRA:-}" ] && pkgs+=($FR_DEPS_EXTRA)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "deps: all present"
