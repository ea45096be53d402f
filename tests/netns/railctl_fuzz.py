#!/usr/bin/env python3
"""railctl's grammar, filled with bad values, against a live railgated.

Draws N commands from a seeded generator: every command railctl has, with
arguments that are often wrong (out-of-range and non-numeric numbers,
unknown and malformed rail names, rates, fault specs, prefixes and
addresses, unwritable capture files, stray words). Each must end on its own
with railctl's documented statuses (0 ok, 1 refused, 2 bad usage, never a
signal or a sanitizer report), and railgated must answer a status request
after each. Commands that run until stopped are always bounded: stats --watch
with a --count, capture with --seconds.
  railctl_fuzz.py RAILCTL SOCKET N SEED WORKDIR
"""
import collections
import json
import os
import random
import socket
import subprocess
import sys
import time

ctl, sock, work = (os.path.abspath(a) for a in (sys.argv[1], sys.argv[2], sys.argv[5]))
n, seed = int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
pick = rnd.choice

rails = ["r0", "r1", "r2", "v0", "all", "", "r0,r1", "r-1", "r99999999999", "R0", "r0 ", "\x01", "r" * 300]
nums = ["0", "1", "-1", "576", "9216", "9000", "70000", "4294967296", "18446744073709551616", "1e9", "abc", "", "0x10",
        "-0", "+5", "1.5", "nan", "inf", "99999999999999999999999", " 5", "5 ", "\u0663", "1500\n"]
rates = ["1g", "10Gbit", "100mbit", "0", "-1g", "1e400", "gbit", "5kbit", "18446744073709551615bit", "1.5g", "abc", ""]
specs = ["drop=0.1", "drop=2", "drop=-1", "dup=0.5,reorder=0.5,corrupt=0.5", "drop=0.1,seed=1,rank=0", "rank=99999",
         "type=result", "type=bogus", "dir=rx", "dir=sideways", "drop=", "=", ",,,", "drop=nan", "drop=0.1,drop=0.2", ""]
prefixes = ["10.0.0.0/8", "198.18.5.0/24", "0.0.0.0/0", "1.2.3.4/33", "999.1.1.1/8", "1.2.3.4", "/", "", "1.2.3.4/-1"]
ips = ["198.18.7.1", "0.0.0.0", "255.255.255.255", "1.2.3", "abc", "", "198.18.7.1/24"]
files = [f"{work}/fuzz.pcapng", "/dev/full", "/nonexistent/c.pcapng", "-", ""]


def some(*words, at_least=0):
    words = list(words)
    return rnd.sample(words, rnd.randint(at_least, len(words)))


def command():
    c = rnd.randrange(21)
    if c == 0:
        return ["status"]
    if c == 1:
        return ["rail", pick(["list", "show"]), pick(rails)]
    if c == 2:
        return ["rail", "set", pick(rails), pick(["mtu", "gid-index", "bogus"]), pick(nums)]
    if c == 3:
        return ["rail", "add", pick(["r2", "r0", "x" * 40, ""]), pick(["udp,interface=lo", "net_null9", "bogus_dev", ""]),
                pick(ips)] + some("--mtu", pick(nums), "--lcore", pick(nums), "--host-ip", pick(prefixes))
    if c == 4:
        return ["rail", "remove", pick(rails)]
    if c == 5:
        return ["gid", "list"] + some(pick(rails))
    if c == 6:
        return ["policy", pick(["show", "set"])] + some("rail", "lag", "--hash", pick(["l2", "l3l4", "l7", ""]))
    if c == 7:
        return ["tc", "list"] + some("--rail", pick(rails))
    if c == 8:
        return ["tc", "set", pick(rails)] + some("tc", pick(nums), "rate", pick(rates), "burst", pick(nums + rates),
                                                  "weight", pick(nums), "strict", at_least=1)
    if c == 9:
        return ["route", pick(["list", "add", "del"]), pick(prefixes), pick(rails)] + some("via", pick(ips))
    if c == 10:
        a = ["stats"] + some("--rail", pick(rails), "--watch", pick(["0.1", "0", "-1", "abc", "1e-9", "0.01"]))
        return a + ["--count", pick(["1", "2", "0", "-1", "abc"])] if "--watch" in a else a
    if c == 11:
        return ["job", "list"] + some("--rail", pick(rails))
    if c == 12:
        return ["job", "abort", pick(nums)] + some("--why", pick(["x", "", "\n" * 5, "y" * 5000]))
    if c == 13:
        return ["latency"] + some("--rail", pick(rails), "--job", pick(nums), "--worker", "--tc", pick(nums), "--reset",
                                  "--plot", pick([f"{work}/p.svg", "/nonexistent/x.svg", "/dev/full", ""]))
    if c == 14:
        return ["fault", pick(["show", "set", "clear", "freeze"]), pick(rails)] + some(
            pick(specs), pick(["0", "1", "10", "-5", "99999999999", "abc"]))
    if c == 15:
        return ["capture", pick(rails + ["r0,r0", "r0,,r1"])] + some(
            "--rx", "--tx", "--drops", "--count", pick(["1", "0", "-1", "abc", "1000"]), "--snaplen", pick(nums),
            "--job", pick(nums), "-w", pick(files)) + ["--seconds", pick(["0.2", "0", "-1", "abc", "nan", "1e-9"])]
    if c == 16:
        return ["nccl-env"]
    if c == 17:
        return [pick(["rail", "tc", "policy", "job", "fault", "route", "capture", "latency", "stats"]), "--help"]
    if c == 18:
        return [pick(["frob", "", "-", "--", "rail", "--json"])]
    if c == 19:
        return ["--json"] + command()
    return ["rail", "set", pick(rails), "mtu", pick(["1000", "1500", "9000", "4000"])]


def run(args):
    # In WORKDIR: a --plot or -w whose value is a stray word writes there.
    return subprocess.run(args, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, cwd=work)


def answers():
    """railgated's answer to a status request on a connection of our own
    (a railctl per check would double the test's time): "" or what is wrong."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(30)
            c.connect(sock)
            c.sendall(b'{"version": 1, "command": "status"}\n')
            line = b""
            while not line.endswith(b"\n"):
                got = c.recv(1 << 16)
                if not got:
                    return f"the connection closed after {line[-300:]!r}"
                line += got
        return "" if json.loads(line).get("ok") is True else f"{line[-300:]!r}"
    except (OSError, ValueError) as e:
        return repr(e)


bad = []
statuses = collections.Counter()
t0 = time.monotonic()
for i in range(n):
    args = [ctl, "--socket", sock] + command()
    if rnd.random() < 0.05:  # a stray word anywhere
        args.insert(rnd.randrange(1, len(args) + 1), pick(nums + rails))
    try:
        p = run(args)
    except subprocess.TimeoutExpired:
        bad.append(f"no answer in 30 s: {args[3:]}")
        continue
    statuses[p.returncode] += 1
    if p.returncode not in (0, 1, 2):
        bad.append(f"exit {p.returncode}: {args[3:]}: {p.stderr[-300:]!r}")
    if any(m in p.stderr for m in (b"terminate called", b"Sanitizer", b"runtime error")):
        bad.append(f"report: {args[3:]}: {p.stderr[-500:]!r}")
    wrong = answers()
    if wrong:
        bad.append(f"railgated stopped answering after {args[3:]}: {wrong}")
        break
for b in bad[:20]:
    print("FAIL:", b)
print(f"seed {seed}: {n} commands in {time.monotonic() - t0:.0f} s; exit statuses "
      + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())) + f"; {len(bad)} wrong")
sys.exit(1 if bad or not all(statuses[k] for k in (0, 1, 2)) else 0)
