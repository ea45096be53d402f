# Shared by the rxe suite's guest-side scripts: start railgated on the
# verbs config and wait until it serves (or fail with its log).
#   . lib.sh; start_railgated BUILD CONFIG SOCKET LOG [RAILGATED ARGS...]
# The job token every worker of a job shares (railbench and raillat take it
# from here): random, as a training job's rendezvous makes it.
export RAILGATE_TOKEN=${RAILGATE_TOKEN:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}
ip link set lo up
ip addr replace 198.18.1.1/24 dev dummy0
# What the guest's RDMA and network stacks counted: each rxe port's
# hardware counters that are not 0 (completer_retry_err: an RC packet sent
# again after its ACK timeout; rcvd_seq_err, duplicate_request: the
# responder's side of it) and the packets the kernel dropped for a full
# backlog (/proc/net/softnet_stat, per CPU). The rxe scripts print it when
# they fail (rxe_counters_on_failure), to tell a lost packet from a held
# process.
rxe_counters() {
  local d f v out drops=
  for d in /sys/class/infiniband/*/ports/*/hw_counters; do
    [ -d "$d" ] || continue
    out=
    for f in "$d"/*; do
      [ "${f##*/}" = lifespan ] && continue # how long the counters are cached, not one
      read -r v < "$f" 2> /dev/null && [ "${v:-0}" != 0 ] && out+=" ${f##*/} $v"
    done
    d=${d#/sys/class/infiniband/}
    echo "rdma counters ${d%/hw_counters}:${out:- all 0}"
  done
  while read -r _ v _; do drops+=" $((16#$v))"; done < /proc/net/softnet_stat
  echo "backlog drops per CPU:$drops"
}
rxe_counters_on_failure() { trap 'rc=$?; [ $rc = 0 ] || rxe_counters; exit $rc' EXIT; }
start_railgated() {
  "$1/dataplane/railgated" --config "$2" --socket "$3" "${@:5}" > "$4" 2>&1 &
  RG_PID=$!
  for _ in $(seq 100); do
    grep -q "railgated: ready" "$4" && return 0
    kill -0 $RG_PID 2> /dev/null || break
    sleep 0.1
  done
  echo "FAIL: railgated did not come up"; cat "$4"; exit 1
}
# run_workers W ARGS...: W railbench ranks over verbs; waits for all; the
# status is the number of ranks that failed. Logs in $WORK/w<rank>.log.
run_workers() {
  local w=$1 r pids=() fails=0
  shift
  for r in $(seq 0 $((w - 1))); do
    timeout 120 "$BUILD/tools/railbench" --transport verbs --server 198.18.0.1 --rank "$r" --workers "$w" "$@" \
      > "$WORK/w$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
  return $fails
}
# A fabric that can lose packets, for RoCE between two local addresses:
# railgated's side 198.18.6.1 on rxel0 (veth end rgl0), the workers'
# 198.18.7.1 on rxel1 (rgl1, the other end). rxe hands a packet for an
# address of its own device to its receive path directly, and the kernel
# carries one for another local address over lo, so neither crosses a
# qdisc that could drop it: here rules ahead of the local table send each
# address's traffic out of the other's veth end and take what arrives on
# either end as local, with static neighbours (no ARP to lose).
# fabric_loss P sets netem (Debian's guest kernel has it) on both ends: P%
# of packets dropped each way (100: cut), 0 none. lossy_fabric_down undoes
# it all (the suite's tests share one guest).
lossy_fabric_up() {
  modprobe sch_netem || return 1
  ip link add rgl0 type veth peer name rgl1 || return 1
  ip addr add 198.18.6.1/24 dev rgl0 && ip addr add 198.18.7.1/24 dev rgl1 || return 1
  ip link set rgl0 up && ip link set rgl1 up || return 1
  local d
  for d in all rgl0 rgl1; do sysctl -qw "net.ipv4.conf.$d.accept_local=1" "net.ipv4.conf.$d.rp_filter=0" || return 1; done
  ip neigh replace 198.18.6.1 lladdr "$(cat /sys/class/net/rgl0/address)" dev rgl1 nud permanent &&
    ip neigh replace 198.18.7.1 lladdr "$(cat /sys/class/net/rgl1/address)" dev rgl0 nud permanent || return 1
  ip rule add pref 100 lookup local && ip rule del pref 0 || return 1
  ip rule add pref 5 iif rgl0 lookup local && ip rule add pref 6 iif rgl1 lookup local || return 1
  ip rule add pref 10 to 198.18.6.1 lookup 106 && ip rule add pref 11 to 198.18.7.1 lookup 107 || return 1
  ip route add 198.18.6.1 dev rgl1 src 198.18.7.1 table 106 &&
    ip route add 198.18.7.1 dev rgl0 src 198.18.6.1 table 107 || return 1
  rdma link add rxel0 type rxe netdev rgl0 && rdma link add rxel1 type rxe netdev rgl1
}
fabric_loss() { # PERCENT
  local d
  for d in rgl0 rgl1; do
    tc qdisc del dev "$d" root 2> /dev/null
    [ "$1" = 0 ] || tc qdisc add dev "$d" root netem loss "$1%" || return 1
  done
}
# The packets netem dropped on both ends so far.
fabric_dropped() {
  { tc -s qdisc show dev rgl0; tc -s qdisc show dev rgl1; } 2> /dev/null | awk '/dropped/ { gsub(",", "", $7); n += $7 } END { print n + 0 }'
}
# The RC resends (completer_retry_err) both ends' devices counted so far.
fabric_resends() {
  local d n=0 v
  for d in rxel0 rxel1; do
    read -r v < "/sys/class/infiniband/$d/ports/1/hw_counters/completer_retry_err" && n=$((n + v))
  done
  echo $n
}
lossy_fabric_down() {
  rdma link delete rxel0 2> /dev/null
  rdma link delete rxel1 2> /dev/null
  ip link del rgl0 2> /dev/null
  local p
  for p in 5 6 10 11; do ip rule del pref $p 2> /dev/null; done
  ip route flush table 106 2> /dev/null
  ip route flush table 107 2> /dev/null
  ip rule show | grep -q '^0:' || ip rule add pref 0 lookup local
  ip rule del pref 100 2> /dev/null
  return 0
}
