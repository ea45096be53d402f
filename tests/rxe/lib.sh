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
