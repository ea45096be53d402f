#!/usr/bin/env bash
# railgate: install dependencies (idempotent), build, then run the demo or the
# test suite.
#   tools/setup.sh demo   # embedded railgated + 4 workers over 2 virtual rails
#   tools/setup.sh test   # the whole test suite (what CI runs)
#   tools/setup.sh deps   # only install the Debian packages
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential meson ninja-build pkg-config clang llvm libclang-rt-14-dev
  libdpdk-dev dpdk-dev dpdk
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers
  libtbb-dev libhwloc-dev libbpf-dev libxdp-dev
  libboost-test-dev libtomlplusplus-dev nlohmann-json3-dev
  iproute2 iputils-ping procps iperf3 python3 cpio ethtool
  linux-image-amd64 qemu-system-x86 busybox-static ibverbs-utils perftest
)

install_deps() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {
  if [ ! -f build/build.ninja ]; then
    meson setup build --buildtype=release
  fi
  ninja -C build
}

mode=${1:-demo}
case "$mode" in
  deps) install_deps ;;
  demo)
    install_deps
    build
    exec build/tools/railbench --embedded
    ;;
  test)
    install_deps
    build
    exec meson test -C build --print-errorlogs --num-processes 1
    ;;
  *) echo "usage: $0 demo|test|deps" >&2; exit 2 ;;
esac
