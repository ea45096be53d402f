#!/usr/bin/env bash
# railgate: install dependencies (idempotent), build, then run the demo or the
# test suite.
#   tools/setup.sh demo   # embedded railgated + 4 workers over 2 virtual rails
#   tools/setup.sh test   # the whole test suite, then the sanitizer runs (what CI runs)
#   tools/setup.sh sanitize  # only the sanitizer runs: ASan+UBSan, then TSan
#   tools/setup.sh deps   # only install the Debian packages (the tests' too)
#   tools/setup.sh bench  # the tests' packages, the benchmarks' peers (perf, OpenMPI), and a build
set -euo pipefail
cd "$(dirname "$0")/.."

# What builds and runs railgate (the demo needs no more).
packages=(
  build-essential meson ninja-build pkg-config clang llvm libclang-rt-14-dev
  libdpdk-dev dpdk-dev dpdk
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers
  libtbb-dev libhwloc-dev libbpf-dev libxdp-dev libsystemd-dev help2man
  libboost-test-dev libtomlplusplus-dev nlohmann-json3-dev
  iproute2 procps python3
)
# What the test suite adds: peers and probes (ping, iperf3, torch for the
# DDP test, tshark for captures, promtool for the metrics lint, perftest),
# the QEMU guest with a real SoftRoCE for the verbs tests, and ccache (meson
# uses it where it finds it: the package test's release tree for /usr is
# then the release tree's objects again, 9 s instead of 2 minutes).
test_packages=(
  iputils-ping iperf3 python3-torch cpio ethtool tshark prometheus systemd
  linux-image-amd64 qemu-system-x86 busybox-static ibverbs-utils perftest ccache
)

# What the benchmarks add: perf for tools/profile.sh, OpenMPI for the
# compare_peers.sh and perf_report.sh rows against MPI_Allreduce, sockperf
# for perf_report.sh's kernel-UDP latency floor.
bench_packages=(linux-perf openmpi-bin libopenmpi-dev sockperf)

install_deps() { # [test|bench]
  local missing=() want=("${packages[@]}")
  [ "${1:-}" = test ] && want+=("${test_packages[@]}")
  [ "${1:-}" = bench ] && want+=("${test_packages[@]}" "${bench_packages[@]}")
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    local sudo="" env=(DEBIAN_FRONTEND=noninteractive)
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # The kernel is the rxe guest's, which tools/rxe-vm boots with an
    # initramfs of its own. On a machine that boots no kernel from /boot (a
    # container, a CI runner) its initramfs is not made: 82 s a time here,
    # and made twice (the kernel's hook, then a trigger), over half of a
    # fresh machine's 295 s of packages. A machine with a kernel in /boot
    # makes it as ever.
    if printf '%s\n' "${missing[@]}" | grep -qx linux-image-amd64 && ! compgen -G '/boot/vmlinuz-*' > /dev/null; then
      env+=(INITRD=No)
    fi
    $sudo apt-get update -qq
    $sudo env "${env[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {
  if [ ! -f build/build.ninja ]; then
    meson setup build --buildtype=release -Dpython=/usr/bin/python3
  fi
  ninja -C build
}

# The product built with ASan+UBSan (build-sanitize) runs the unit, vdev,
# e2e and netns suites, and the verbs fault test in the rxe guest
# (rxe-sanitized); built with TSan (build-tsan), the tests of the
# engine's threads (placement), of the control socket's server thread
# (control), of librailgate (c-api) and of capture's ring (capture), and
# railgated itself on udp rails (udp-rails-kernel-socket: jobs, railctl's
# live changes and the exit, when the lcores' loops end and the rails are
# freed), railgated through the fault test's steps where its threads meet
# (RAILGATE_TSAN=1: the fault injector set from the control thread, a
# kill and restart, a link going down, the exit), railgated under a stream of
# railctl's live changes while jobs run (live-changes-under-load: MTUs,
# policies, faults, freezes, shaping, snapshots and a rail hot-plugged and
# removed, which the control thread hands the lcores), the embedded
# default with its
# DPDK workers, also under faults (frames cross threads there through DPDK,
# which railgate's TSan build annotates: dataplane/net/burst.hpp). The
# TSan tree's verbs allreduce in the rxe guest (rxe-verbs-allreduce-tsan,
# 84 s) is left to a run by hand: with it CI took 1,764 s of its 30
# minutes here (ninja -C build-tsan tools/raillat tests/unit/test_histogram tests/rxe/verbs_probe
# dataplane/railgated railctl tools/railbench, then meson test -C
# build-tsan rxe-verbs-allreduce-tsan, as root: the test sets the
# sanitizers' options and RAILGATE_TSAN itself).
# Optimised (-O1) so that the netns traffic keeps its timing. Built with
# clang: it compiles the sanitized tree in half GCC's time here (256 s
# against 523 s for build-sanitize), its UBSan checks more (enum loads), and
# the project gets a second compiler's warnings; the release tree stays GCC.
# Unity builds (a target's sources compiled a few at a time as one): the
# ASan+UBSan tree builds in 222 s against 270 here; the release tree, the
# product, stays one object per source.
# Line tables only, not full debug information: the sanitizers' reports
# name every frame's file and line all the same, and railgated's objects
# compile in 26 s against 31 (the unit tests' own code is built without
# optimisation there: tests/unit/meson.build).
# A tree built with the sanitizers in $2, configured once.
sanitized_tree() {
  [ -f "$1/build.ninja" ] || CC=clang CXX=clang++ meson setup "$1" --buildtype=plain -Doptimization=1 -Dpython=/usr/bin/python3 \
    -Dcpp_args=-gline-tables-only -Dc_args=-gline-tables-only \
    -Db_sanitize="$2" -Db_lundef=false -Db_ndebug=false -Dfuzz=disabled -Dunity=on
}

# The host the suites run on: COMMAND in a private mount namespace where
# DPDK's plugin directory holds only the drivers the tests use, with 2 GiB
# of hugepages free. Outside root, COMMAND runs on the host as it is.
#  - A shared DPDK's EAL dlopens every driver in its plugin directory at
#    each start: Debian's 128, with their libraries (mlx5, ipsec-mb,
#    isal...). That cost 0.11 s a start here, 1.2 s under TSan and 2-4 s in
#    the rxe guest (over 9p, under TCG), and the suites start an EAL
#    many times (railgated, DPDK workers, raillat, railbench
#    --embedded). The namespace's directory holds the virtual rails' PMDs,
#    the vdev bus, the default mempool ops and the drivers these link
#    (bus_pci): the rxe suite took 155 s against 184, TSan's four longest
#    tests 145 s against 165. The code under test is the same, and a test
#    that needed another driver would fail, not skip.
#  - On hugepages (with_hugepages) the embedded EAL (dataplane/net/eal.cpp)
#    and the netns tests' railgated (tests/netns/lib.sh) take them as a
#    real node does, where 1 GiB is free; on 4 KiB pages each start faults
#    its packet pools in (railgated ready in 0.60-0.70 s against 0.35-0.55,
#    railbench --embedded 0.82 s against 0.50). The e2e and vdev suites
#    took 63 s against 81 (ASan+UBSan 92 against 107, TSan's 70 against
#    80). The 4 KiB-page path keeps its tests: control-plane-railctl's,
#    raillat-compare's and limits-against-memory's railgated run on it, and
#    railbench-embedded-hugepages runs the embedded EAL on both.
test_drivers=(mempool_ring bus_vdev net_ring net_null net_af_xdp net_af_packet net_memif net_tap)
as_test_host() { # COMMAND...
  local pmds dir d n rc=0 queue=()
  pmds=$(echo "$(pkg-config --variable=libdir libdpdk 2>/dev/null)"/dpdk/pmds-*)
  if [ "$(id -u)" -ne 0 ] || [ ! -d "$pmds" ] || ! command -v unshare > /dev/null; then
    "$@"
    return
  fi
  dir=$(mktemp -d)
  queue=("${test_drivers[@]}")
  while ((${#queue[@]})); do
    d=${queue[0]} queue=("${queue[@]:1}")
    [ -e "$dir/librte_$d.so" ] && continue
    cp -P "$pmds/librte_$d".so* "$dir/"
    # the drivers this one links (the rest of DPDK lives beside libdpdk, not here)
    for n in $(readelf -d "$pmds/librte_$d.so" | sed -nE 's/.*Shared library: \[librte_([a-z0-9_]+)\.so\..*/\1/p'); do
      [ -e "$pmds/librte_$n.so" ] && queue+=("$n")
    done
  done
  with_hugepages unshare --mount --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
    sh "$dir" "$pmds" "$@" || rc=$?
  rm -rf "$dir"
  return $rc
}

# with_hugepages COMMAND...: as root, COMMAND with 1024 hugepages of 2 MiB
# free (the kernel may find fewer), those it reserved given back after, or
# at the script's exit (an interrupt); otherwise COMMAND as it is.
hugepages_nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages hugepages_before=
give_hugepages_back() { [ -z "$hugepages_before" ] || echo "$hugepages_before" > "$hugepages_nr"; hugepages_before=; }
trap give_hugepages_back EXIT
with_hugepages() { # COMMAND...
  local free rc=0
  if [ "$(id -u)" -eq 0 ] && [ -w "$hugepages_nr" ]; then
    free=$(cat "${hugepages_nr%/*}/free_hugepages")
    if [ "$free" -lt 1024 ]; then
      hugepages_before=$(cat "$hugepages_nr")
      echo $((hugepages_before + 1024 - free)) > "$hugepages_nr" || true
    fi
  fi
  "$@" || rc=$?
  give_hugepages_back
  return $rc
}

# A tree's tests: the unit tests and the fuzzers (each bounded in time, one
# CPU each) two at a time, then the rest one at a time (is_parallel: false:
# the vdev, e2e, netns and rxe tests time their traffic, and a second test
# on this machine's other CPU would take the CPU railgated polls on).
# Here every package a test needs is installed, so a skipped test is a
# failure: libFuzzer's crash exit (77) is meson's SKIP, and fuzz-worker
# crashed unseen from aab44bc to ef5cf50, "skipped" in every CI run.
run_suites() { # DIR [MESON_TEST_ARGS...]
  local dir=$1 since skipped
  shift
  since=$(mktemp)
  as_test_host meson test -C "$dir" "$@" --print-errorlogs --num-processes 2 --logbase testlog-parallel --suite unit --suite fuzz
  as_test_host meson test -C "$dir" "$@" --print-errorlogs --num-processes 1 --no-suite unit --no-suite fuzz
  skipped=$(find "$dir/meson-logs" -name 'testlog*.json' -newer "$since" -exec python3 -c '
import json, sys
for f in sys.argv[1:]:
    for line in open(f):
        t = json.loads(line)
        if t["result"] == "SKIP":
            print(t["name"], end="; ")' {} +)
  rm -f "$since"
  [ -z "$skipped" ] || { echo "setup: tests skipped in $dir, where all they need is installed: $skipped" >&2; return 1; }
}

# CI's time, phase by phase: "setup: PHASE took N s (M s in all)".
phase_t0=0
phase() { echo "setup: $1 took $((SECONDS - phase_t0)) s ($SECONDS s in all)"; phase_t0=$SECONDS; }

sanitize() {
  local dir=build-sanitize tsan=build-tsan targets
  sanitized_tree $dir address,undefined
  # What the sanitize setup runs: not the benchmarks.
  targets=$(meson introspect $dir --targets | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["type"] == "custom" or t["type"] == "executable" and not t["name"].startswith("bench_"):
        print(" ".join(os.path.relpath(f, sys.argv[1]) for f in t["filename"]))' "$dir")
  # shellcheck disable=SC2086
  ninja -C $dir $targets
  phase "ASan+UBSan build"
  run_suites $dir --setup sanitize --no-rebuild
  phase "ASan+UBSan tests"
  sanitized_tree $tsan thread
  ninja -C $tsan tests/unit/test_placement tests/unit/test_control tests/unit/test_c_api tests/unit/test_capture \
    tests/vdev/test_rail_loop tests/vdev/test_udp_port dataplane/railgated railctl tools/railbench
  phase "TSan build"
  # The unit tests two at a time (as in the other trees), then the rest one at a time.
  RAILGATE_TSAN=1 as_test_host meson test -C $tsan --setup sanitize --no-rebuild --print-errorlogs --num-processes 2 \
    --logbase testlog-parallel placement control c-api capture
  RAILGATE_TSAN=1 as_test_host meson test -C $tsan --setup sanitize --no-rebuild --print-errorlogs --num-processes 1 \
    rail-loop-net_ring udp-port-loopback udp-rails-kernel-socket faults-loss-kill-stop-restart-rail-down \
    live-changes-under-load dpdk-workers-af_xdp-af_packet-tap \
    railbench-embedded-fp32 railbench-embedded-lcore-workers railbench-embedded-mtu9000-pool3 railbench-window-under-loss \
    railbench-embedded-one-worker-link
  phase "TSan tests"
}

mode=${1:-demo}
case "$mode" in
  deps) install_deps test ;;
  demo)
    install_deps
    build
    with_hugepages build/tools/railbench --embedded
    ;;
  test)
    install_deps test
    phase "packages"
    build
    phase "release build"
    run_suites build --no-rebuild
    phase "release tests"
    sanitize
    ;;
  sanitize)
    install_deps test
    sanitize
    ;;
  bench)
    install_deps bench
    build
    ;;
  *) echo "usage: $0 demo|test|sanitize|deps|bench" >&2; exit 2 ;;
esac
