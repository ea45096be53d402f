#!/usr/bin/env python3
"""Trains a small convolutional network with DistributedDataParallel, its
gradients summed through railgate's DDP hooks or through gloo.

  ddp_train.py --backend railgate|gloo --world N --steps S --server IP [--hook fp32|bf16|fp16]

N processes on this host (torch.multiprocessing: forked where torch sees no
CUDA device, each inheriting the imported torch; spawned where it does, as
CUDA needs); the gloo process group (TCP on 127.0.0.1) does everything but
the gradient allreduce. The data set is generated (fixed seed, no
downloads): 32x32 RGB images, each its class's random pattern under noise.
Prints per-step loss (rank 0's batch), the time spent in gradient
communication per step (the union of the buckets' hook-call-to-result
intervals, measured the same way for both backends) and a SHA-256 of the
final parameters; exits non-zero if a rank failed (after printing its
error) or the ranks' parameters differ.

--model large has 10.6 M parameters (the performance figure's), small
0.14 M (the tests'). --save FILE writes rank 0's final parameters
(torch.save of one flat tensor). --die-rank R --die-step K: rank R SIGKILLs
itself before step K (a rank lost mid-training). --spans prints, per rank
and step, each bucket's size, when its hook was called (ms into the step)
and how long its result took: "8.4 MB 205.3+25.4 ms".

Needs a Python with torch (Debian: /usr/bin/python3) and, for railgate, the
railgate package on PYTHONPATH (build/client/python in the build tree).
"""

import argparse
import datetime
import functools
import hashlib
import json
import os
import signal
import socket
import statistics
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["railgate", "gloo"], required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--server", default="", help="railgated's rail-0 address (railgate)")
    p.add_argument("--transport", default="udp", help="railgate transport: udp, dpdk or verbs")
    p.add_argument("--hook", choices=["fp32", "bf16", "fp16"], default="fp32")
    p.add_argument("--cc", choices=["queue", "delay", "off"], default="queue",
                   help="railgate's congestion control (State's congestion_control)")
    p.add_argument("--model", choices=["small", "large"], default="small")
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--save", default="")
    p.add_argument("--die-rank", type=int, default=-1)
    p.add_argument("--die-step", type=int, default=-1)
    p.add_argument("--timeout", type=int, default=60, help="gloo and railgate timeouts, seconds")
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    p.add_argument("--spans", action="store_true",
                   help="per step and rank: each bucket's size, hook call (ms into the step) and time to its result")
    a = p.parse_args()
    if a.backend == "railgate" and not a.server:
        p.error("--backend railgate needs --server IP (railgated's rail 0)")
    if a.world < 1 or a.steps < 1:
        p.error("--world and --steps must be at least 1")
    if a.backend == "gloo" and a.hook == "bf16":
        p.error("gloo has no bf16 hook here (torch 1.13's bf16_compress_hook needs NCCL)")
    return a


def make_model(nn, size):
    if size == "small":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 2048), nn.ReLU(),
        nn.Linear(2048, 1024), nn.ReLU(), nn.Linear(1024, 10))


class CommTimer:
    """Wraps a hook: per step, the union of the intervals from a bucket's
    hook call to its result (overlapping buckets counted once)."""

    def __init__(self, hook):
        self.spans = []

        @functools.wraps(hook)   # DDP logs the hook's name
        def timed(state, bucket):
            t0 = time.perf_counter()
            nbytes = bucket.buffer().numel() * bucket.buffer().element_size()

            def done(fut):
                self.spans.append((t0, time.perf_counter(), nbytes))
                return fut.value()   # re-raises a failure into DDP's backward

            return hook(state, bucket).then(done)

        self.hook = timed

    def take(self):
        """The step's communication time, and its buckets' (start, end,
        bytes) in hook-call order."""
        total, end = 0.0, 0.0
        spans = sorted(self.spans)
        for a, b, _ in spans:
            if b > end:
                total += b - max(a, end)
                end = b
        self.spans = []
        return total, spans


def rank_main(rank, a, port, results):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    step = -1
    state = None
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.world,
                                timeout=datetime.timedelta(seconds=a.timeout))
        torch.manual_seed(a.seed)
        model = make_model(nn, a.model)
        n_params = sum(p.numel() for p in model.parameters())
        # The data set: every rank makes the same one; rank r takes the
        # r-th slice of each global batch. An image is its class's pattern
        # under twice its strength of noise.
        g = torch.Generator().manual_seed(a.seed + 1)
        n = 2048
        patterns = torch.randn(10, 3, 32, 32, generator=g)
        y_all = torch.randint(0, 10, (n,), generator=g)
        x_all = 0.5 * patterns[y_all] + torch.randn(n, 3, 32, 32, generator=g)
        x_eval, y_eval = x_all[:256], y_all[:256]

        ddp = DDP(model, broadcast_buffers=False, bucket_cap_mb=a.bucket_mb)
        if a.backend == "railgate":
            import railgate.torch as rgt
            cc = {"queue": "queue", "delay": "delay", "off": False}[a.cc]
            state = rgt.State(server=a.server, transport=a.transport, timeout_ms=a.timeout * 1000,
                              congestion_control=cc)
            hook = {"fp32": rgt.allreduce_hook, "bf16": rgt.bf16_hook, "fp16": rgt.fp16_hook}[a.hook]
            hook_state = state
        else:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            hook = {"fp32": default_hooks.allreduce_hook, "fp16": default_hooks.fp16_compress_hook}[a.hook]
            hook_state = None   # the default process group
        timer = CommTimer(hook)
        ddp.register_comm_hook(hook_state, timer.hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)

        def eval_loss():
            with torch.no_grad():
                return F.cross_entropy(model(x_eval), y_eval).item()

        loss0 = eval_loss()
        step_s, comm_s = [], []
        gb = a.batch * a.world
        for step in range(a.steps):
            if rank == a.die_rank and step == a.die_step:
                print(f"rank {rank}: SIGKILL before step {step}", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            lo = (step * gb) % (n - gb + 1) + rank * a.batch
            x, y = x_all[lo:lo + a.batch], y_all[lo:lo + a.batch]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            step_s.append(time.perf_counter() - t0)
            comm, spans = timer.take()
            comm_s.append(comm)
            if rank == 0 and not a.quiet:
                print(f"step {step:4d}  loss {loss.item():.5f}  step {step_s[-1] * 1e3:8.2f} ms  "
                      f"comm {comm_s[-1] * 1e3:8.2f} ms", flush=True)
            if a.spans:   # one write(): the ranks' lines must not interleave
                line = f"rank {rank} step {step}: buckets " + ", ".join(
                    f"{n / 1e6:.1f} MB {(b0 - t0) * 1e3:.1f}+{(b1 - b0) * 1e3:.1f} ms" for b0, b1, n in spans)
                sys.stdout.flush()
                os.write(sys.stdout.fileno(), (line + "\n").encode())
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        digest = hashlib.sha256(flat.numpy().tobytes()).hexdigest()
        if rank == 0 and a.save:
            torch.save(flat, a.save)
        # Steady state: the first step builds DDP's buckets.
        tail = slice(1, None) if a.steps > 2 else slice(None)
        retx = state.comm.stats()["retransmits"] if state else 0
        results.put({"rank": rank, "sha256": digest, "params": n_params, "loss0": loss0, "loss": eval_loss(),
                     "step_ms": statistics.median(step_s[tail]) * 1e3,
                     "comm_ms": statistics.median(comm_s[tail]) * 1e3, "retransmits": retx})
        if state:
            state.close()
        dist.destroy_process_group()
    except Exception as e:   # a failed allreduce comes out of backward()
        print(f"rank {rank}: training failed at step {step}: {e}", file=sys.stderr, flush=True)
        os._exit(3)   # no gloo teardown: the other ranks may be gone


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    a = parse()
    import torch
    import torch.multiprocessing as mp
    # Forked, a rank starts 2.5-3 s sooner here (no import of torch of its
    # own); nothing in this process has run a torch operation (no thread
    # pool to inherit). Once this process has asked CUDA for its devices,
    # a forked child cannot use CUDA: spawned there.
    ctx = mp.get_context("spawn" if torch.cuda.is_available() else "fork")
    results = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, a, port, results), daemon=False) for r in range(a.world)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    codes = []
    for p in procs:
        p.join()
        codes.append(p.exitcode)
    out = []
    while not results.empty():
        out.append(results.get())
    out.sort(key=lambda r: r["rank"])
    failed = [r for r, c in enumerate(codes) if c != 0]
    summary = {"backend": a.backend, "hook": a.hook, "world": a.world, "steps": a.steps, "model": a.model,
               "exit_codes": codes, "seconds": round(time.perf_counter() - t0, 2)}
    if out:
        summary.update({"params": out[0]["params"], "sha256": out[0]["sha256"], "loss0": out[0]["loss0"],
                        "loss": out[0]["loss"], "step_ms": max(r["step_ms"] for r in out),
                        "comm_ms": max(r["comm_ms"] for r in out),
                        "retransmits": sum(r["retransmits"] for r in out)})
    if failed:
        print(f"ddp_train: ranks {failed} failed (exit codes {codes})", file=sys.stderr)
        print("result " + json.dumps(summary), flush=True)
        return 1
    if len({r["sha256"] for r in out}) != 1 or len(out) != a.world:
        print("ddp_train: the ranks' final parameters differ", file=sys.stderr)
        print("result " + json.dumps(summary), flush=True)
        return 1
    print(f"ddp_train: {a.backend}/{a.hook}, {a.world} ranks, {summary['params']} parameters, {a.steps} steps: "
          f"eval loss {summary['loss0']:.5f} -> {summary['loss']:.5f}, step {summary['step_ms']:.2f} ms, "
          f"comm {summary['comm_ms']:.2f} ms (median per step, slowest rank), "
          f"{summary['retransmits']} chunks resent, sha256 {summary['sha256']}")
    print("result " + json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
