# Shared by the netns tests (sourced). The caller sets $log (a directory of
# logs shown on failure) and keeps railgated's pid in $gated_pid.
# The job token every worker of a job shares (railbench and raillat take it
# from here): random, as a training job's rendezvous makes it.
export RAILGATE_TOKEN=${RAILGATE_TOKEN:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}

# The tests' railgated run on hugepages where the host has 1 GiB of them
# free, as a real node runs and as the embedded EAL decides
# (dataplane/net/eal.cpp; tools/setup.sh test reserves 2 GiB for the
# suites), else on 4 KiB pages; $RAILGATE_HUGEPAGES decides instead, as
# for the embedded EAL ("0" never, "1" always). On 4 KiB pages a railgated
# faults its packet pools in as it starts: ready in 0.60-0.70 s here
# against 0.35-0.55 s on hugepages (the release tree's netns suites took
# the same time either way, within the noise). Whatever the host has,
# limits.sh keeps 4 KiB pages for its address-space caps
# (test_eal_flags_4k), and control_plane.sh and raillat.sh give their
# railgated --no-huge themselves.
hugepages_free_mib=0
for h in /sys/kernel/mm/hugepages/hugepages-*kB; do
  [ -r "$h/free_hugepages" ] || continue
  kb=${h##*/hugepages-}
  hugepages_free_mib=$((hugepages_free_mib + $(cat "$h/free_hugepages") * ${kb%kB} / 1024))
done
case ${RAILGATE_HUGEPAGES:-} in
  0) test_hugepages=false ;;
  1) test_hugepages=true ;;
  *) if [ "$hugepages_free_mib" -ge 1024 ]; then test_hugepages=true; else test_hugepages=false; fi ;;
esac
# The EAL options after "--" (railgated [OPTIONS] -- EAL-OPTIONS): no PCI,
# no shared config or files, no telemetry socket.
test_eal_flags_4k="--no-huge --no-pci --no-shconf --no-telemetry -l 0-1 -m 512 --log-level lib.eal:error"
test_eal_flags=$test_eal_flags_4k
$test_hugepages && test_eal_flags="--in-memory --no-pci --no-telemetry -l 0-1 --log-level lib.eal:error"
# The same as the [eal] table of the tests' railgated configs (a real
# node's config leaves these keys out).
test_eal='[eal]
lcores = "0-1"
pci = false
telemetry = false
log_levels = ["lib.eal:error"]'
$test_hugepages || test_eal="$test_eal
memory_mb = 512
hugepages = false"

# Skips (exit 77) where network namespaces cannot be made.
require_netns() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
  ip netns add "rgprobe$$" 2>/dev/null || { echo "SKIP: cannot create network namespaces"; exit 77; }
  ip netns del "rgprobe$$"
}

# Sets $python to the tests' Python with torch ($RAILGATE_TEST_PYTHON,
# default Debian's /usr/bin/python3); skips (exit 77) where it has none.
require_torch() {
  python=${RAILGATE_TEST_PYTHON:-/usr/bin/python3}
  "$python" -c 'import torch' 2> /dev/null || { echo "SKIP: $python has no torch (Debian: apt install python3-torch)"; exit 77; }
}

fail() {
  echo "FAIL: $*"
  for f in "$log"/*.log; do echo "--- $f"; tail -n 40 "$f"; done
  exit 1
}

# Waits (15 s at most) for railgated, started in the background with its
# output in LOGFILE, to say it is ready.
wait_ready() { # LOGFILE
  for _ in $(seq 150); do
    grep -q "railgated: ready" "$1" && return
    kill -0 "$gated_pid" 2>/dev/null || fail "railgated exited ($1)"
    sleep 0.1
  done
  fail "railgated not ready ($1)"
}

# SIGINT (or the signal given), then railgated must exit cleanly within 5 s.
stop_gated() { # [SIGNAL]
  local sig=${1:-INT}
  kill -"$sig" "$gated_pid"
  for _ in $(seq 50); do kill -0 "$gated_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$gated_pid" 2>/dev/null && fail "railgated ignored SIG$sig"
  wait "$gated_pid"; local rc=$?
  gated_pid=
  [ $rc -eq 0 ] || fail "railgated exit status $rc"
}

# On exit: kill railgated if it still runs, delete the namespaces given and
# remove the paths given (logs, DPDK runtime dirs).
#   trap 'cleanup_netns "ns1 ns2" "$dir /var/run/dpdk/$prefix"' EXIT
cleanup_netns() { # "NAMESPACES" "PATHS"
  # Under `set -e` (tools/compare_peers.sh), a kill that finds nothing
  # (no helper left, railgated already gone) ended the trap here, and the
  # namespaces stayed behind (perf_report.sh, 2026-11-30: rgcd14011).
  set +e
  [ -n "${gated_pid:-}" ] && kill -9 "$gated_pid" 2>/dev/null
  # shellcheck disable=SC2046
  kill $(jobs -p) 2>/dev/null # helpers the test left in the background
  # shellcheck disable=SC2046
  kill -CONT $(jobs -p) 2>/dev/null # a stopped one takes its signal once resumed
  wait 2>/dev/null
  local n
  # And what runs in the namespaces (a failed test's background loops leave
  # their children there: live_changes.sh's tenants' railbench processes,
  # which went on for up to their 90 s, into the next test).
  # shellcheck disable=SC2046
  for n in $1; do kill -9 $(ip netns pids "$n" 2>/dev/null) 2>/dev/null; done
  for n in $1; do ip netns del "$n" 2>/dev/null; done
  # shellcheck disable=SC2086
  rm -rf $2
}

# A kernel sender on a veth leaves UDP checksums for a NIC to finish
# (CHECKSUM_PARTIAL), and af_packet and af_xdp hand railgated the frame as
# it is; railgated drops datagrams without a right UDP checksum
# (udp_checksum). Kernel workers on veths compute them themselves.
csum_in_software() { # NS IF...
  local ns=$1 i
  shift
  for i in "$@"; do ip netns exec "$ns" ethtool -K "$i" tx off > /dev/null || fail "ethtool -K $i tx off in $ns"; done
}

# GRO on the workers' veth IF (in NS) that coalesces what railgated sends
# from its peer PEER (in PEER_NS), as a NIC's does: the veth takes frames
# into GRO only from a peer without TSO, and batches them only when its
# NAPI runs in a thread of its own (af_packet sends each frame with bottom
# halves enabled after it, which would run the softirq one frame at a time).
gro_veth() { # NS IF PEER_NS PEER
  ip netns exec "$1" ethtool -K "$2" gro on > /dev/null &&
    ip netns exec "$3" ethtool -K "$4" tso off > /dev/null &&
    ip netns exec "$1" sh -c "echo 1 > /sys/class/net/$2/threaded"
}

# Two rails: namespaces D (railgated) and W (workers), veths rgd0/rgd1 in D
# to rgw0/rgw1 in W at 198.18.0.10 and 198.18.1.10, loopback up in both.
two_rail_netns() { # D W
  ip netns add "$1" && ip netns add "$2" || fail "netns"
  local r
  for r in 0 1; do
    ip link add "rgd$r" netns "$1" type veth peer name "rgw$r" netns "$2" || fail "veth $r"
    ip -n "$2" addr add "198.18.$r.10/24" dev "rgw$r"
    ip -n "$1" link set "rgd$r" up
    ip -n "$2" link set "rgw$r" up
    csum_in_software "$2" "rgw$r"
  done
  ip -n "$1" link set lo up
  ip -n "$2" link set lo up
}

# railgated on the rails of two_rail_netns as udp rails (the kernel's
# sockets on 198.18.0.1 and 198.18.1.1, which railgated's veth ends get;
# the workers' ends checksum by offload again, as veths do by default),
# both links at MTU (default 1500), railgated's options ARGS after them;
# sets $gated_pid and waits until it is ready.
start_two_rail_udp_gated() { # RAILGATED D W LOGFILE [MTU [ARGS...]]
  local gated=$1 dns=$2 wns=$3 out=$4 mtu=${5:-1500} r
  shift 5 2> /dev/null || shift $#
  for r in 0 1; do
    ip -n "$dns" addr add "198.18.$r.1/24" dev "rgd$r"
    ip -n "$dns" link set "rgd$r" mtu "$mtu"
    ip -n "$wns" link set "rgw$r" mtu "$mtu"
    ip netns exec "$wns" ethtool -K "rgw$r" tx on > /dev/null || fail "ethtool -K rgw$r tx on"
  done
  ip netns exec "$dns" "$gated" --rail udp --ip 198.18.0.1 --mtu "$mtu" --rail udp --ip 198.18.1.1 --mtu "$mtu" \
    "$@" -- $test_eal_flags > "$out" 2>&1 &
  gated_pid=$!
  wait_ready "$out"
}

# The benchmarks' railgated facing kernel-UDP workers: udp rails (as the
# embedded default has them) or, with KERNEL_PORT=af_packet, DPDK af_packet
# rails on the same veths; the arguments as start_two_rail_udp_gated's.
start_kernel_port_gated() { # RAILGATED D W LOGFILE [MTU [ARGS...]]
  case ${KERNEL_PORT:-udp} in
    udp) start_two_rail_udp_gated "$@" ;;
    af_packet) start_two_rail_gated "$@" ;;
    *) echo "KERNEL_PORT is udp or af_packet" >&2; exit 2 ;;
  esac
}

# The CPUs railgated's lcores (its rte-worker-N threads) are not pinned to,
# as a taskset list (empty when they cover every CPU): where the
# benchmarks put kernel-UDP workers that share railgated's host, as a DPDK
# deployment keeps other work off its poll-mode cores (2 workers, 4 MiB:
# 1.25-1.97 GB/s unpinned, 1.60-2.08 off the lcore; doc/performance.md).
# rail_stat RAIL KEY: the rail's counter KEY, or a drop reason's count, from
# railctl's JSON stats (through the caller's ctl function).
rail_stat() {
  ctl --json stats --rail "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)["rails"][0]; print(r.get(sys.argv[1], r["drops"].get(sys.argv[1], 0)))' "$2"
}

cpus_off_lcores() { # PID
  /usr/bin/python3 - "$1" <<'PY'
import os, sys
pid, busy = sys.argv[1], set()
for t in os.listdir(f"/proc/{pid}/task"):
    try:
        if open(f"/proc/{pid}/task/{t}/comm").read().startswith("rte-worker"):
            busy |= os.sched_getaffinity(int(t))
    except OSError:
        pass  # the thread ended
print(",".join(str(c) for c in sorted(os.sched_getaffinity(0) - busy)))
PY
}

# railgated on the rails of two_rail_netns, as the README starts it:
# af_packet on rgd0/rgd1 at 198.18.0.1 and 198.18.1.1, both links at MTU
# (default 1500), railgated's options ARGS after them; sets $gated_pid and
# waits until it is ready.
start_two_rail_gated() { # RAILGATED D W LOGFILE [MTU [ARGS...]]
  local gated=$1 dns=$2 wns=$3 out=$4 mtu=${5:-1500} fs=2048 bs=4096 r
  shift 5 2> /dev/null || shift $#
  [ "$mtu" -gt 1500 ] && fs=10240 bs=20480
  for r in 0 1; do
    ip -n "$dns" link set "rgd$r" mtu "$mtu"
    ip -n "$wns" link set "rgw$r" mtu "$mtu"
  done
  ip netns exec "$dns" "$gated" \
    --rail "net_af_packet0,iface=rgd0,framesz=$fs,blocksz=$bs,framecnt=1024" --ip 198.18.0.1 --mtu "$mtu" \
    --rail "net_af_packet1,iface=rgd1,framesz=$fs,blocksz=$bs,framecnt=1024" --ip 198.18.1.1 --mtu "$mtu" \
    "$@" -- $test_eal_flags > "$out" 2>&1 &
  gated_pid=$!
  wait_ready "$out"
}

# tests/install/rg_abi_check (a C program on librailgate): every rank of a
# job at once in namespace W against railgated at 198.18.0.1, each rank's
# output shown; fails if one does.
abi_ranks() { # CHECK W MODE WORLD JOB [ARGS...]
  local check=$1 wns=$2 mode=$3 world=$4 job=$5 pids=() r
  shift 5
  for r in $(seq 0 $((world - 1))); do
    timeout 60 ip netns exec "$wns" "$check" "$mode" 198.18.0.1 "$r" "$world" "$job" "$@" \
      > "$log/$mode-$job-$r.log" 2>&1 &
    pids+=($!)
  done
  for r in $(seq 0 $((world - 1))); do
    wait "${pids[$r]}" || fail "$mode, job $job, rank $r"
    cat "$log/$mode-$job-$r.log"
  done
}
# Job 30, held by this token (its rank 0 waits for rank 1), refuses a join
# with another token, saying why, and then completes for its own.
abi_token_refused() { # CHECK W
  local check=$1 wns=$2 holder
  timeout 60 ip netns exec "$wns" "$check" run 198.18.0.1 0 2 30 > "$log/hold-0.log" 2>&1 &
  holder=$!
  sleep 0.5
  RAILGATE_TOKEN=$(printf %u $((RAILGATE_TOKEN ^ 1))) timeout 60 ip netns exec "$wns" "$check" refused 198.18.0.1 1 2 30 \
    > "$log/refused.log" 2>&1 || fail "another token on job 30 was not refused"
  cat "$log/refused.log"
  grep -q "token differs" "$log/refused.log" || fail "the refusal does not say why"
  timeout 60 ip netns exec "$wns" "$check" run 198.18.0.1 1 2 30 > "$log/hold-1.log" 2>&1 || fail "job 30 rank 1"
  wait "$holder" || fail "job 30 rank 0 (held while another token was refused)"
  echo "ok: job 30 bit-exact for its token, refused for another"
}
