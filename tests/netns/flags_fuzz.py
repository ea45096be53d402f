#!/usr/bin/env python3
"""The binaries' own flags with bad values, a seeded stream.

Each run gives one binary 1-3 options drawn from its own --help, most with
a value drawn from a pool of wrong ones (out of range, not numbers, huge,
unreadable or endless files, directories, stray words), after a base
command line that would work. Every run must end within its time with a
documented status, no signal and no sanitizer report or `terminate
called`; a railgated that starts must say it is ready, then stop on
SIGTERM with exit 0 (every buffer back). Run inside a network namespace
with only lo (flags_fuzz.sh makes it): nothing a value names leaves it.

  flags_fuzz.py RAILGATED RAILBENCH RAILLAT RUNS SEED WORKDIR EAL_FLAGS...
"""
import collections
import concurrent.futures
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

gated, bench, lat = (os.path.abspath(b) for b in sys.argv[1:4])
runs, seed, work = sys.argv[4:7]
eal = sys.argv[7:]
runs, seed = int(runs), int(seed)
sanitized = os.environ.get("RAILGATE_SANITIZED") == "1"
rnd = random.Random(seed)

values = [
    # numbers: in and out of every range, and not numbers
    "0", "1", "-1", "2", "3", "7", "576", "1500", "9000", "9216", "70000", "4294967296",
    "18446744073709551616", "99999999999999", "1e9", "0.5", "-0", "+5", "0x10", "nan", "inf", "abc", "",
    " 5", "5\n", "\u0663", "1k", "4M", "1G", "1,2,3", "1,,2", ",", "0,0",
    # words the options take, and near misses
    "fp32", "bf16", "fp16", "int32", "float", "udp", "dpdk", "verbs", "floor-ring", "spin", "yield", "sleep",
    "off", "on", "auto", "delay", "queue", "debug", "loud", "drop=0.1", "drop=2,seed=1", "dir=sideways",
    # addresses and devices
    "127.0.0.1", "198.18.0.1", "1.2.3", "999.0.0.1", "127.0.0.1:0", "0.0.0.0:9477", "host:1", "net_null0",
    "net_ring0", "net_tap0", "net_af_packet0,iface=lo", "udp,interface=lo", "0000:00:00.0", "bogus",
    # files: endless, full, a directory, missing parents, relative names (written in WORKDIR)
    "/dev/zero", "/dev/full", "/dev/null", "/dev/stdin", "/", ".", f"{work}/missing/x", f"{work}/a/b/c",
    "out.txt", "-", "--", "x" * 5000,
]


def options_of(binary):
    text = subprocess.run([binary, "--help"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    found = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", text.stdout + text.stderr)
    return sorted(set(found) - {"--help", "-h"})


def draw(opts):
    args = []
    for _ in range(rnd.randint(1, 3)):
        args.append(rnd.choice(opts))
        if rnd.random() < 0.8:
            args.append(rnd.choice(values))
    return args


def report(err):
    return any(m in err for m in (b"terminate called", b"Sanitizer", b"runtime error:", b"Segmentation"))


def tail(b):
    return b[-400:].decode(errors="replace")


sock = f"{work}/gated.sock"
targets = [
    # name, base argv, options drawn from, statuses allowed, seconds allowed, the rest after the drawn options
    # --check of the embedded default (--config is then read) and of a rail
    ("railgated --check", [gated, "--check"], gated, {0, 1, 2}, 20, []),
    ("railgated --check", [gated, "--check", "--rail", "net_null0", "--ip", "198.18.0.1"], gated, {0, 1, 2}, 20, []),
    ("railgated", [gated, "--socket", sock, "--metrics", "off", "--rail", "net_null0", "--ip", "198.18.0.1"],
     gated, {0, 1, 2}, 30, ["--"] + eal),
    ("railbench --embedded", [bench, "--embedded", "--workers", "2", "--count", "1000,4097", "-n", "2", "-w", "0"],
     bench, {0, 1, 2}, 60, []),
    ("raillat", [lat, "--transport", "dpdk", "-n", "100", "-w", "10", "--bw-size", "0"], lat, {0, 1, 2}, 60, []),
]


def run(name, argv, allowed, limit):
    """Runs argv; returns its status (or "ready, then stopped") and what was wrong."""
    wrong = []
    what = f"{name} {argv}"
    ready = False
    err = b""
    with open(f"{work}/out{threading.get_native_id()}", "wb") as out, open("/dev/zero", "rb") as zero:
        p = subprocess.Popen(argv, stdin=zero, stdout=out, stderr=subprocess.PIPE, cwd=work, start_new_session=True)
        if name == "railgated":
            # Watch for "ready" while it starts, then stop it.
            deadline = time.monotonic() + limit
            os.set_blocking(p.stderr.fileno(), False)
            while p.poll() is None and time.monotonic() < deadline and b"railgated: ready" not in err:
                time.sleep(0.01)
                err += p.stderr.read() or b""
            if b"railgated: ready" in err:
                ready = True
                p.send_signal(signal.SIGTERM)
            os.set_blocking(p.stderr.fileno(), True)
        # Then wait (the others: no poll loop, whose sleeps would cost more than most of the 3,000 runs);
        # a railgated that neither said ready nor ended in its time is hung.
        try:
            err += p.communicate(timeout=limit if ready or name != "railgated" else 1)[1]
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            err += p.communicate()[1]
            return "hung", [f"{what}: {'did not stop on SIGTERM' if ready else 'still running'} after {limit} s: "
                            f"{tail(err)!r}"]
    rc = p.returncode
    if rc < 0:
        wrong.append(f"{what}: killed by signal {-rc}: {tail(err)!r}")
    elif ready and rc != 0:
        wrong.append(f"{what}: ready, then exit {rc} on SIGTERM (3: a buffer not back): {tail(err)!r}")
    elif rc not in allowed:
        wrong.append(f"{what}: exit {rc}, not one of {sorted(allowed)}: {tail(err)!r}")
    if report(err):
        wrong.append(f"{what}: {tail(err)!r}")
    return ("ready, then stopped" if ready else rc), wrong


bad = []
t0 = time.monotonic()
for name, base, of, allowed, limit, rest in targets:
    opts = options_of(of)
    if len(opts) < 8:
        bad.append(f"{name}: only {len(opts)} options found in --help")
        continue
    statuses = collections.Counter()
    t = time.monotonic()
    for _ in range(runs):
        argv = base + draw(opts) + rest
        if rnd.random() < 0.05:  # a stray value anywhere
            argv.insert(rnd.randrange(1, len(argv) + 1), rnd.choice(values))
        st, wrong = run(name, argv, allowed, limit)
        statuses[st] += 1
        bad += wrong
    print(f"{name}: {runs} runs, " + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items(), key=str)) +
          f"; {len(opts)} options; {time.monotonic() - t:.1f} s", flush=True)
    if name == "railgated" and not statuses["ready, then stopped"]:
        bad.append("railgated: no run started (the base command line is broken?)")
    if name == "railgated --check" and len(base) == 2:
        # It costs milliseconds: every option with every value, once (under
        # the sanitizers, a run costs ten times that: every eighth value,
        # from another first one for each option, so that every value still
        # meets some option; every fourth until 2026-12-06, 33 s of CI),
        # two at a time (a run is mostly the binary's start: its libraries).
        statuses = collections.Counter()
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for st, wrong in pool.map(lambda ov: run(name, base + list(ov), allowed, limit),
                                      ((o, v) for k, o in enumerate(opts)
                                       for v in (values[k % 8::8] if sanitized else values))):
                statuses[st] += 1
                bad += wrong
        print(f"{name}: every option with every value, {sum(statuses.values())} runs, " +
              ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items(), key=str)) +
              f"; {time.monotonic() - t:.1f} s", flush=True)
for b in bad[:20]:
    print("FAIL:", b)
print(f"seed {seed}: {runs} runs per binary in {time.monotonic() - t0:.0f} s; {len(bad)} wrong")
sys.exit(1 if bad else 0)
