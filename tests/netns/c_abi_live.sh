#!/usr/bin/env bash
# librailgate's C ABI against a real railgated, from the build tree (the
# install test, tests/install/c_abi.sh, does the same from installed files
# but only in the release tree): in the sanitized tree this runs the library
# and tests/install/rg_abi_check.c under ASan+UBSan against a sanitized
# railgated on two af_packet rails in a namespace. Three ranks run every
# dtype, blocking and async, in place and out of place, bit-exact; a join
# with another token is refused; a rank that dies is named in the others'
# errors. railgated paused past the ranks' peer timeout under 2 ranks with
# retries (one C, one Python: librailgate's Python package through the
# same library; C both in the sanitized tree): each keeps the job, asks
# again and goes on where it stood, bit-exact, and says so through
# config.on_retry (the C rank prints its lines; the Python rank's go to
# the "railgate" logger's warnings, its default).
#   c_abi_live.sh RG_ABI_CHECK RAILGATED [PYTHONPATH]
set -u
check=$1 railgated=$2 pypath=${3:-}
. "$(dirname "$0")/lib.sh"
require_netns
log=$(mktemp -d)
d=rgld$$ w=rglw$$
gated_pid=
trap 'cleanup_netns "$d $w" "$log"' EXIT
"$check" usage || fail "argument checks"
# The Python package: $RAILGATE_LIBRARY that names no library is an
# ImportError naming it, not a silent fall back to another librailgate.
if [ -n "$pypath" ] && [ -z "${RAILGATE_SANITIZED:-}" ]; then
  PYTHONPATH="$pypath" RAILGATE_LIBRARY="$log/none.so" /usr/bin/python3 -c 'import railgate' > "$log/nolib.out" 2>&1 &&
    fail "import railgate with RAILGATE_LIBRARY=$log/none.so worked"
  grep -q "ImportError: railgate: cannot load librailgate ($log/none.so: " "$log/nolib.out" ||
    fail "import railgate without its library: $(tail -n 2 "$log/nolib.out")"
  echo "ok: $(tail -n 1 "$log/nolib.out")"
  # Integers ctypes would wrap silently (a port of 70000 was 4464, a count
  # of 2^64 was 0: an allreduce of nothing) are refused before the library.
  PYTHONPATH="$pypath" /usr/bin/python3 - <<'PY' || fail "the Python package's integer checks"
import railgate
for kw, want in ((dict(port=70000), "port 70000 is out of range 0..65535"), (dict(token=-1), "token -1 is out of"),
                 (dict(job=2**32), "job 4294967296 is out of"), (dict(world=1.5), "world must be an integer")):
    args = dict(job=1, token=5, rank=0, world=1)
    args.update(kw)
    try:
        railgate.Comm("198.18.0.1", **args)
        raise SystemExit(f"Comm({kw}) was accepted")
    except (ValueError, TypeError) as e:
        assert want in str(e), (kw, str(e))
print("ok: Comm refuses port 70000, token -1, job 2^32 and world 1.5 by name")
PY
fi
two_rail_netns "$d" "$w"
start_two_rail_gated "$railgated" "$d" "$w" "$log/railgated.log"
abi_ranks "$check" "$w" run 3 10
abi_token_refused "$check" "$w"
abi_ranks "$check" "$w" die 3 40 3
# The pause: 60 allreduces 30 ms apart; railgated stopped for 1.2 s once
# both ranks have joined (and a few operations in).
pause_rank() { # RANK
  if [ "$1" = 1 ] && [ -n "$pypath" ] && [ -z "${RAILGATE_SANITIZED:-}" ]; then
    ip netns exec "$w" env PYTHONPATH="$pypath" timeout 60 /usr/bin/python3 - 198.18.0.1 1 2 50 60 <<'PY'
import array, os, sys, time, weakref
import railgate
server, rank, world, job, ops = sys.argv[1], *map(int, sys.argv[2:])
n = 4099
value = lambda r, i: ((i * 7 + r * 3) % 29) * 0.25
with railgate.Comm(server, job=job, token=int(os.environ["RAILGATE_TOKEN"]), rank=rank, world=world, max_count=n,
                   retries=3, peer_timeout_ms=300) as c:
    # Refused before the library: counts and dtypes ctypes would wrap,
    # buffers smaller than the count (the library would go past them) and
    # typed buffers of another element (float64 summed as FP32: garbage).
    small, five = array.array("f", [0.0] * 4), array.array("f", [0.0] * 5)
    for call in (lambda: c.allreduce(small, 2**64), lambda: c.allreduce(small, -1),
                 lambda: c.allreduce(small, 4, 2**32), lambda: c.allreduce(small, 5),
                 lambda: c.allreduce(five, 5, out=small), lambda: c.allreduce(memoryview(five)[::2], 3),
                 lambda: c.allreduce_start(small, 5), lambda: c.allreduce_compressed(small, 5),
                 lambda: c.allreduce_compressed_start(small, 4, wire=2**40),
                 lambda: c.allreduce(array.array("d", [0.0] * 5), 5), lambda: c.allreduce(five, 5, railgate.INT32),
                 lambda: c.allreduce_compressed(array.array("H", [0] * 10), 5)):
        try:
            call()
            raise SystemExit("an allreduce past its buffer or its C types was accepted")
        except ValueError as e:
            print(f"ok: refused: {e}", flush=True)
    # A child forked from a rank: its calls are refused, and its exit (the
    # with block's close()) sends no LEAVE that would end this rank's job.
    pid = os.fork()
    if pid == 0:
        try:
            c.allreduce(array.array("f", [0.0] * n), n)
            code = 1
        except railgate.RailgateError as e:
            code = 0 if e.status == "RG_ERR_USAGE" and "a process forked from it cannot use it" in str(e) else 2
        sys.exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    assert code == 0, f"the forked child exited {code}"
    print("ok: a forked child's calls refused; its close() left the job alone", flush=True)
    # A request dropped unwaited, its buffer the request's alone: the
    # buffer stays alive while the library may write into it, and goes once
    # the allreduce has ended. Job 51's rank 1 never comes, so the allreduce
    # runs until its 1.5 s timeout; close() finishes it.
    with railgate.Comm(server, job=51, token=railgate.random_token(), rank=0, world=2, max_count=n,
                       timeout_ms=1500) as lone:
        f = array.array("f", [1.0] * n)
        dropped = weakref.ref(f)
        lone.allreduce_start(f, n, railgate.FP32)
        del f
        assert dropped() is not None, "a dropped request's buffer was freed while its allreduce ran"
    assert dropped() is None, "a dropped request's buffer outlived its allreduce and its communicator"
    print("ok: a dropped request's buffer held until its allreduce ended, then let go", flush=True)
    print(f"joined: rank {rank}", flush=True)   # (and about to start): the test pauses railgated now
    want = lambda k: array.array("f", [sum(value(r, i) + k for r in range(world)) for i in range(n)])
    for k in range(ops - 1):
        f = array.array("f", [value(rank, i) + k for i in range(n)])
        if k == 8:
            # A bytearray cannot be resized (moved) under its allreduce;
            # once waited for, it can.
            b = bytearray(f.tobytes())
            req = c.allreduce_start(b, n, railgate.FP32)
            try:
                b.extend(b"\0" * 4)
                raise SystemExit("a bytearray was resized under its allreduce")
            except BufferError:
                pass
            req.wait()
            assert array.array("f", bytes(b)) == want(k), "the bytearray's allreduce: wrong elements"
            b.extend(b"\0" * 4)
            print("ok: a bytearray could not be resized under its allreduce, and could after it", flush=True)
            time.sleep(0.03)
            continue
        c.allreduce(f, n, railgate.FP32)
        assert f == want(k), f"allreduce {k}: wrong elements"
        time.sleep(0.03)
    recoveries = c.stats()["recoveries"]
    # The last one asynchronous, waited for after the communicator closed
    # (close finishes it; the request stays readable).
    f = array.array("f", [value(rank, i) + ops - 1 for i in range(n)])
    last = c.allreduce_start(f, n, railgate.FP32)
last.wait()
assert f == want(ops - 1), "the allreduce waited for after close: wrong elements"
for call in (lambda: c.allreduce(f, n), lambda: c.allreduce_start(f, n), lambda: c.stats(), lambda: c.abort()):
    try:
        call()
        raise SystemExit("a closed communicator was used")
    except ValueError as e:
        assert str(e) == "railgate: the communicator is closed", str(e)
print("ok: a request waited for after close; a closed communicator's calls refused", flush=True)
print(f"ok: rank {rank} (python): {ops} allreduces bit-exact, {recoveries} recoveries", flush=True)
PY
  else
    timeout 60 ip netns exec "$w" "$check" pause 198.18.0.1 "$1" 2 50 60
  fi
}
for r in 0 1; do pause_rank $r > "$log/pause-$r.log" 2>&1 & pids[$r]=$!; done
for _ in $(seq 100); do
  grep -q joined "$log/pause-0.log" && grep -q joined "$log/pause-1.log" && break
  sleep 0.1
done
sleep 0.3
kill -STOP "$gated_pid"
sleep 1.2
kill -CONT "$gated_pid"
for r in 0 1; do
  wait "${pids[$r]}" || fail "pause, rank $r: $(cat "$log/pause-$r.log")"
  cat "$log/pause-$r.log"
  grep -q "rank $r: job 50 (fp32): operation [0-9]*: railgated stopped answering on every rail for .*; asking railgated again for the job as it was" "$log/pause-$r.log" &&
    grep -q "rank $r: job 50 (fp32): railgated answered: operation [0-9]* went on where it stood" "$log/pause-$r.log" ||
    fail "rank $r was not told of the pause and the resume through on_retry"
done
stop_gated
grep -q "still in use" "$log/railgated.log" && fail "buffers leaked ($(grep "still in use" "$log/railgated.log"))"
echo PASS
