#!/usr/bin/env bash
# Where the time goes: samples every CPU (perf record -a, cpu-clock: this
# machine has no hardware counters) while an allreduce benchmark runs, and
# sorts the samples into phases by the function they landed in:
#   copy in    the worker's copy of its tensor into frames (kernel UDP:
#              the kernel's copy-and-checksum)
#   copy in/out embedded: both of the workers' copies, into mbufs and out
#              of them (one function, memcpy or copy_and_sum: a profile by
#              function cannot tell them apart)
#   wire       moving frames: rings and PMDs, the kernel's UDP/IP stack,
#              veths and af_packet, system-call entry
#   sum        railgated's reduce kernels
#   copy out   the worker's copy of results into its tensor (with the UDP
#              checksum check where it is the worker's)
#   railgated  the rest of railgated's lcore: its poll loop (idle polls
#              included, inlined parse, aggregation and transmit)
#   worker     the rest of the workers' own code (their progress loop)
#   wait       yielding and sleeping (sched_yield, ppoll, the scheduler)
#   idle       no task on the CPU
#   harness    railbench's own input generation and check, page faults
# A function inlined into another counts as the other (railgated's loop
# inlines its handlers). Percentages are of all samples on all CPUs.
# RAILGATE_PROFILE_ITERS sets the timed iterations (default 30). Embedded,
# one thread drives the workers (railbench --lcore-workers off), so that
# railgated's lcore runs railgated alone and the workers' copies count as
# copies.
#   tools/profile.sh [BUILD_DIR] [embedded|udp] [WORKERS] [SIZE] [MTU]
# udp: railgated on two udp rails in a namespace (KERNEL_PORT=af_packet:
# DPDK af_packet rails), kernel-UDP workers in another, off railgated's
# lcore CPU as compare_peers.sh runs them (root). Prints the
# benchmark's busbw and the phase table.
set -u
build=$(cd "${1:-build}" && pwd) mode=${2:-embedded} workers=${3:-2} size=${4:-64M} mtu=${5:-9000}
here=$(cd "$(dirname "$0")" && pwd)
command -v perf > /dev/null || { echo "profile.sh: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
out=$(mktemp -d)
export RAILGATE_TOKEN=${RAILGATE_TOKEN:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}
bench=(-b "$size" -e "$size" -n "${RAILGATE_PROFILE_ITERS:-30}" -w 2)
case $mode in
embedded)
  cat > "$out/run.sh" <<EOF
"$build/tools/railbench" --embedded --workers $workers --mtu $mtu --lcore-workers off ${bench[*]} > "$out/bench-0.log" 2>&1
EOF
  trap 'rm -rf "$out"' EXIT
  ;;
udp)
  . "$here/../tests/netns/lib.sh"
  require_netns
  d=rgfd$$ w=rgfw$$ gated_pid=
  trap 'cleanup_netns "$d $w" "$out"' EXIT
  two_rail_netns "$d" "$w"
  start_kernel_port_gated "$build/dataplane/railgated" "$d" "$w" "$out/railgated.log" "$mtu"
  off=$(cpus_off_lcores "$gated_pid") # as compare_peers.sh places them
  {
    echo 'pids=()'
    for k in $(seq 0 $((workers - 1))); do
      echo "ip netns exec $w ${off:+taskset -c $off} \"$build/tools/railbench\" --transport udp --server 198.18.0.1 --rank $k" \
        "--workers $workers --job 91 ${bench[*]} > \"$out/bench-$k.log\" 2>&1 & pids+=(\$!)"
    done
    echo 'wait "${pids[@]}"'
  } > "$out/run.sh"
  ;;
*) echo "profile.sh: mode embedded or udp, not '$mode'" >&2; exit 2 ;;
esac
perf record -q -a -e cpu-clock -F 2000 -o "$out/perf.data" -- bash "$out/run.sh" 2> "$out/perf.err" ||
  { cat "$out/perf.err" >&2; exit 1; }
grep -q "Out of bounds values : 0 OK" "$out/bench-0.log" || { cat "$out/bench-0.log" >&2; exit 1; }
busbw=$(awk '/Avg bus bandwidth/ {print $(NF-1)}' "$out/bench-0.log")
echo "# profile.sh: $mode, $workers workers, $size allreduce, MTU $mtu, $(nproc) CPUs; busbw $busbw GB/s" \
  "($(git -C "$here/.." rev-parse --short HEAD 2> /dev/null || echo '?'), $(date -u +%F))"
perf report -i "$out/perf.data" --stdio --no-children --sort comm,dso,sym -F overhead,comm,dso,sym \
  --percent-limit 0 -t $'\t' 2> /dev/null | /usr/bin/python3 -c '
import collections, re, sys
mode = sys.argv[1]
rules = [
    ("idle", lambda c, d, s: c == "swapper" or re.search(r"safe_halt|default_idle|cpuidle|do_idle|mwait", s)),
    ("harness", lambda c, d, s: re.search(r"fill_input|restore_input|scalbn|memcmp|count_wrong|page_fault|anonymous_page|clear_page|"
                                          r"handle_mm_fault|get_page_from_freelist|alloc_pages|free_pages|folio|lruvec|"
                                          r"mem_cgroup|unmap_page|shmem|rmqueue|memset", s)),
    ("sum", lambda c, d, s: re.search(r"reduce::|sum_float|sum_fp|sum_bf16|sum_fp16|sum_int", s)),
    # Embedded, both copies are the same function (memcpy with the
    # switch checksum offload, copy_and_sum without): one row.
    ("copy in/out", lambda c, d, s: mode == "embedded" and not c.startswith("rte-") and
                                    re.search(r"memmove|memcpy|words_avx|copy_and_sum", s)),
    ("copy out", lambda c, d, s: not c.startswith("rte-") and (
        re.search(r"words_avx|copy_and_sum|copy_to_iter|copy_user|_copy_to_user", s)
        or (mode == "udp" and re.search(r"memmove|memcpy", s)))),
    ("copy in", lambda c, d, s: not c.startswith("rte-") and re.search(r"csum_partial_copy|copy_from_iter|copy_from_user", s)),
    ("wait", lambda c, d, s: re.search(r"__schedule|sched_yield|schedule$|futex|ppoll|do_poll|poll_schedule|"
                                       r"hrtimer|finish_task_switch|pick_next|dequeue_task|enqueue_task", s)),
    # The kernel is the wire for kernel-UDP workers; embedded, its samples
    # are page faults and scheduling, which the rules above take.
    ("wire", lambda c, d, s: (mode == "udp" and d.startswith("[kernel")) or d.startswith("librte_") or
                             re.search(r"rte_eth|rte_ring|rte_pktmbuf|parse_|classify|encode_header|udp_headers|"
                                       r"checksum|transport::(send|recv)|syscall", s)),
    ("railgated", lambda c, d, s: c.startswith("rte-") or re.search(r"net::daemon|net::detail|lcore_main|poll_rail", s)),
    ("worker", lambda c, d, s: re.search(r"client::", s)),
]
phase, top = collections.Counter(), collections.defaultdict(collections.Counter)
for line in sys.stdin:
    f = line.rstrip("\n").split("\t")
    if len(f) < 4 or not f[0].strip().endswith("%"):
        continue
    pct, comm, dso, sym = float(f[0].strip().rstrip("%")), f[1].strip(), f[2].strip(), f[3].strip()
    sym = re.sub(r"^\[[.k]\] ", "", sym)
    # A library without symbols (Debian strips the DPDK drivers) shows
    # bare addresses: name the library instead, one entry for all of them.
    if re.fullmatch(r"0x[0-9a-f]+", sym):
        sym = "%s (no symbols)" % dso
    name = next((p for p, rule in rules if rule(comm, dso, sym)), "other")
    phase[name] += pct
    top[name][sym[:60]] += pct
order = ["copy in", "copy in/out", "wire", "sum", "copy out", "railgated", "worker", "wait", "idle", "harness", "other"]
print("| phase | share of all CPU samples | largest functions |")
print("|---|---|---|")
for p in order:
    if phase[p] < 0.05:
        continue
    print("| %s | %.1f%% | %s |" % (p, phase[p], ", ".join("%s %.1f%%" % (s.replace("|", "/"), v) for s, v in top[p].most_common(3))))
' "$mode"
