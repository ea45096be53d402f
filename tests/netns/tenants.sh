#!/usr/bin/env bash
# Tenants and hostile input on a shared rail network: railgated on 2
# af_packet rails, a switch namespace bridging them to two tenants' hosts
# (namespaces A at .10 and B at .11 on each rail), kernel-UDP railbench
# workers.
#  1. the same job id, different tokens, both teams at once: each team is
#     bit-exact or refused at JOIN naming the id in use; never a wrong
#     element, never a timeout;
#  2. the same id and token, team B while team A runs: B is refused
#     (rank_taken, naming where each rank is bound), A bit-exact; then
#     both at once: each team bit-exact or refused (a clash ends the job
#     of both), never a wrong element;
#  3. a flood from B (forged JOINs, contributions, LEAVEs, aborts, PINGs
#     with random tokens for A's job and random jobs, truncated and garbage
#     datagrams) during A's job: A bit-exact; a new job joins within the
#     assembly expiry after the flood; with railgated otherwise quiet, every
#     flood datagram it received is counted: a drop under a reason, or a
#     forged JOIN that assembled (and expired).
#   tenants.sh RAILGATED RAILBENCH RAILCTL
set -u
railgated=$1 railbench=$2 railctl=$3
. "$(dirname "$0")/lib.sh"
require_netns

d=rgtd$$ s=rgts$$ a=rgta$$ b=rgtb$$ log=$(mktemp -d)
gated_pid=
trap 'cleanup_netns "$d $s $a $b" "$log"' EXIT
for n in "$d" "$s" "$a" "$b"; do ip netns add "$n" || fail "netns $n"; ip -n "$n" link set lo up; done
for r in 0 1; do
  ip link add "rgd$r" netns "$d" type veth peer name "up$r" netns "$s" || fail "veth $r"
  ip -n "$s" link add "br$r" type bridge || fail "bridge"
  ip -n "$s" link set "up$r" master "br$r"
  for t in a b; do
    ns=$a host=10
    [ $t = b ] && ns=$b host=11
    ip link add "t$t$r" netns "$ns" type veth peer name "s$t$r" netns "$s" || fail "veth $t$r"
    ip -n "$s" link set "s$t$r" master "br$r"
    ip -n "$s" link set "s$t$r" up
    ip -n "$ns" addr add "198.18.$r.$host/24" dev "t$t$r"
    ip -n "$ns" link set "t$t$r" up
    csum_in_software "$ns" "t$t$r"
  done
  ip -n "$s" link set "up$r" up
  ip -n "$s" link set "br$r" up
  ip -n "$d" link set "rgd$r" up
done

cat > "$log/rg.toml" <<TOML
$test_eal
[daemon]
control_socket = "$log/rg.sock"
metrics = ""
[pools]
max_jobs = 8
[jobs]
assemble_ms = 2000
[[rail]]
name = "r0"
devargs = "net_af_packet0,iface=rgd0,framesz=2048,blocksz=4096,framecnt=1024"
ip = "198.18.0.1"
[[rail]]
name = "r1"
devargs = "net_af_packet1,iface=rgd1,framesz=2048,blocksz=4096,framecnt=1024"
ip = "198.18.1.1"
TOML
ip netns exec "$d" "$railgated" --config "$log/rg.toml" > "$log/railgated.log" 2>&1 &
gated_pid=$!
wait_ready "$log/railgated.log"
ctl() { ip netns exec "$d" "$railctl" --socket "$log/rg.sock" "$@"; }
now() { date +%s.%N; }

# team NS NAME JOB TOKEN SEED ARGS...: ranks 0 and 1 of a 2-rank job in the
# background; pids in $team_pids.
team() {
  local ns=$1 name=$2 job=$3 token=$4 seed=$5 r
  shift 5
  team_pids=()
  for r in 0 1; do
    ip netns exec "$ns" timeout 60 "$railbench" --transport udp --server 198.18.0.1 --rank $r --workers 2 --job "$job" \
      --token "$token" --seed "$seed" "$@" > "$log/$name-$r.log" 2>&1 &
    team_pids+=($!)
  done
}
# verdict NAME PIDS...: $V = "exact" or "refused" (every rank refused at
# JOIN with a reason), or fails the test (a wrong element, a timeout, a mix).
verdict() {
  local name=$1 ok=0 refused=0 r=0 p
  shift
  for p in "$@"; do
    if wait "$p"; then
      grep -q "Out of bounds values : 0 OK" "$log/$name-$r.log" || fail "$name rank $r: wrong values"
      ok=$((ok + 1))
    else
      grep -qE "refused the join on rail [01]: (job [0-9]+ is in use by another job|rank [01] of job [0-9]+ is joined from|two processes claim rank|job [0-9]+ with this token ended)|ended the job on rail [01]: two processes claim rank" \
        "$log/$name-$r.log" || { cat "$log/$name-$r.log"; fail "$name rank $r failed without a clear refusal"; }
      refused=$((refused + 1))
    fi
    r=$((r + 1))
  done
  grep -qE " [1-9][0-9]* *$" <(grep -E "^ +[0-9]+ +[0-9]+ +fp32" "$log/$name"-*.log) && fail "$name: a wrong element"
  [ $ok -eq 2 ] && { V=exact; return; }
  [ $refused -eq 2 ] && { V=refused; return; }
  fail "$name: one rank finished and one was refused"
}
tok() { od -An -N8 -tu8 /dev/urandom | tr -d ' '; }

# --- 1. same job id, different tokens, at once.
ta=$(tok) tb=$(tok)
team "$a" t1a 7 "$ta" 1 --count 1000003 -n 20 -w 0 --join-timeout 2000
pa=("${team_pids[@]}")
team "$b" t1b 7 "$tb" 2 --count 1000003 -n 20 -w 0 --join-timeout 2000
pb=("${team_pids[@]}")
verdict t1a "${pa[@]}"; va=$V
verdict t1b "${pb[@]}"; vb=$V
[ "$va" = exact ] || [ "$vb" = exact ] || fail "neither team ran (A $va, B $vb)"
echo "ok: job 7 with two tokens at once: team A $va, team B $vb; no wrong element"

# --- 2. same id and token, team B while team A runs: once A's job has
# summed a chunk on both rails (its table header alone is not enough: under
# the sanitizers B's JOIN then came before A's first chunk, and railgated
# rightly ended the job as claimed twice before it started, as in 2b).
agg0=$(rail_stat r0 aggregations) agg1=$(rail_stat r1 aggregations)
t=$(tok)
# 3 s of operations (railbench -D: however fast the host), B refused within
# its 1 s join timeout (a job A had ended first would let B run: "team B
# exact", a failure).
team "$a" t2a 8 "$t" 1 --count 1000003 -D 3 -w 0
pa=("${team_pids[@]}")
for _ in $(seq 200); do
  [ "$(rail_stat r0 aggregations)" -gt "$agg0" ] && [ "$(rail_stat r1 aggregations)" -gt "$agg1" ] && break
  sleep 0.05
done
team "$b" t2b 8 "$t" 2 --count 1000003 -n 2 -w 0 --join-timeout 1000
pb=("${team_pids[@]}")
verdict t2b "${pb[@]}"; vb=$V
verdict t2a "${pa[@]}"; va=$V
[ "$va" = exact ] && [ "$vb" = refused ] || fail "same token: team A $va, team B $vb"
grep -q "rank 0 of job 8 is joined from 198.18.0.10" "$log/t2b-0.log" || fail "same token: refusal does not say where rank 0 is bound"
echo "ok: job 8, one token, team B while team A runs: B refused naming A's binding, A bit-exact"

# --- 2b. same id and token, both teams at once: railgated cannot tell the
# runs apart, so a rank claimed twice before the job has run a chunk ends
# it for both and refuses that id and token for the assembly time; a team
# that started a chunk earlier runs, the other waits for it (rank_taken)
# or is refused.
outcomes=
for round in 1 2 3; do
  t=$(tok) t0=$(now)
  team "$a" "t4a$round" "2$round" "$t" 1 --count 1000003 -n 5 -w 0 --join-timeout 3000
  pa=("${team_pids[@]}")
  team "$b" "t4b$round" "2$round" "$t" 2 --count 1000003 -n 5 -w 0 --join-timeout 3000
  pb=("${team_pids[@]}")
  verdict "t4a$round" "${pa[@]}"; va=$V
  verdict "t4b$round" "${pb[@]}"; vb=$V
  took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  awk -v t="$took" 'BEGIN { exit !(t < 20) }' || fail "same token at once: the teams took $took s"
  outcomes="$outcomes A $va/B $vb ($took s);"
  sleep 2.1 # the clash's hold (assemble_ms)
done
echo "ok: one id and token, both teams at once, 3 rounds:$outcomes never a wrong element or a wait"

# --- 3. a flood from B's host during A's job, then alone.
flood() { # COUNT SEED
  ip netns exec "$b" python3 - "$1" "$2" <<'PY'
import random, socket, struct, sys
n, seed = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(seed)
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
rails = ["198.18.0.1", "198.18.1.1"]
def hdr(t, job, token, rank, world, slot=0, count=0, off=0, gen=0, aux=0, dt=0):
    return struct.pack(">BBBBIQHHHHQII", 2, t, dt, 0, job, token, rank, world, slot, count, off, gen, aux)
for i in range(n):
    k = i % 8
    job = 9 if k < 5 else rnd.randrange(1 << 32)
    token = rnd.getrandbits(64)
    if k == 0:   # JOIN, random job and token
        body = struct.pack(">QHHIQ", rnd.randrange(1, 1 << 20), 0, 0, 0, rnd.getrandbits(64))
        msg = hdr(1, rnd.randrange(1 << 32), token, 0, 2) + body
    elif k == 1: # a contribution for job 9 with a wrong token
        c = rnd.randrange(1, 256)
        msg = hdr(3, job, token, rnd.randrange(2), 2, rnd.randrange(64), c, 0, rnd.getrandbits(32)) + bytes(4 * c)
    elif k == 2: # abort, LEAVE, RTT report or PING for job 9
        msg = hdr(rnd.choice([5, 6, 8, 10]), job, token, rnd.randrange(2), 2, gen=rnd.getrandbits(32))
    elif k == 3: # truncated header
        msg = hdr(3, job, token, 0, 2)[: rnd.randrange(1, 40)]
    elif k == 4: # bad version / type
        msg = bytes([rnd.randrange(256), rnd.randrange(256)]) + bytes(rnd.randrange(100))
    else:        # random bytes of random length, any type
        msg = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 1400)))
    socks[i % 4].sendto(msg, (rails[i % 2], 47000))
PY
}
counts() { # -> "rx drops joins arp leaves_again" summed over the rails
  ctl --json stats | python3 -c '
import json, sys
rs = json.load(sys.stdin)["rails"]
print(sum(r["rx_packets"] for r in rs), sum(sum(r["drops"].values()) for r in rs), sum(r["joins"] for r in rs),
      sum(r["arp_replies"] for r in rs), sum(r["leaves_again"] for r in rs))'
}
t=$(tok)
team "$a" t3a 9 "$t" 3 --count 1000003 -n 40 -w 0
pa=("${team_pids[@]}")
for _ in $(seq 100); do grep -q size "$log/t3a-0.log" && grep -q size "$log/t3a-1.log" && break; sleep 0.1; done
flood 20000 1
verdict t3a "${pa[@]}"; va=$V
[ "$va" = exact ] || fail "flood: team A $va"
# Another host's new job joins at once; the flooding host's own (its
# forged JOINs fill its pending quota) once they expire.
t0=$(now)
team "$a" t3c 11 "$(tok)" 5 --count 100003 -n 2 -w 0 --join-timeout 1000
verdict t3c "${team_pids[@]}"; [ "$V" = exact ] || fail "after the flood: host A's new job $V"
ta=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
team "$b" t3b 10 "$(tok)" 4 --count 100003 -n 2 -w 0 --join-timeout 4000
verdict t3b "${team_pids[@]}"; vb=$V
[ "$vb" = exact ] || fail "after the flood: a new job $vb"
took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
echo "ok: 20000 forged and garbage datagrams during job 9: bit-exact; a new job from host A ran ${ta} s after the flood, one from the flooding host ${took} s after (assembly expiry 2 s)"
sleep 2.5 # the forged jobs expire
read -r rx0 dr0 jo0 arp0 la0 < <(counts)
flood 10000 2
sleep 0.5
read -r rx1 dr1 jo1 arp1 la1 < <(counts)
rx=$((rx1 - rx0)) dr=$((dr1 - dr0)) jo=$((jo1 - jo0)) arp=$((arp1 - arp0)) la=$((la1 - la0))
[ "$rx" -ge 9000 ] || fail "flood alone: railgated received only $rx of 10000"
# (A LEAVE for a job railgated does not have is acknowledged, as the
# repeat of one whose LEAVE_ACK was lost, at most once a millisecond per
# rail: counted as leaves_again.)
[ $((dr + jo + arp + la)) -eq "$rx" ] ||
  { ctl --json stats; fail "flood alone: received $rx, counted $dr drops + $jo assembling JOINs + $arp ARP + $la LEAVEs acknowledged"; }
[ "$jo" -le 8 ] || fail "flood alone: $jo forged JOINs admitted (the per-host limit is 4 per rail)"
echo "ok: a flood alone: $rx datagrams received, every one counted ($dr drops under a reason, $jo forged JOINs admitted to assemble, $arp ARP, $la LEAVEs of jobs railgated does not have acknowledged)"
stop_gated
echo "PASS"
