#!/usr/bin/python3
"""The baseline railgate is compared with: torch.distributed's gloo backend
(CPU, TCP over loopback) doing fp32 sum all_reduce with W local processes.

usage: /usr/bin/python3 tools/gloo_allreduce.py --world W --bytes B[,B...] [--iters 10] [--warmup 3]

Each timed operation starts after a barrier; its time is the slowest rank's
(an all_reduce of the times, MAX); the median over the iterations is
reported, with nccl-tests' algbw = bytes / t and busbw = algbw * 2(W-1)/W,
the figures railbench prints. Every result is checked (ranks hold r + 1)."""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, a):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{a.port}", rank=rank, world_size=a.world)
    w = a.world
    for nbytes in a.bytes:
        x = torch.empty(nbytes // 4, dtype=torch.float32)
        times = []
        for i in range(a.warmup + a.iters):
            x.fill_(rank + 1.0)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if i >= a.warmup:
                times.append(t.item())
        if not torch.all(x == w * (w + 1) / 2):
            print(f"gloo_allreduce: wrong sum at {nbytes} bytes", file=sys.stderr)
            sys.exit(1)
        if rank == 0:
            med = statistics.median(times)
            alg = nbytes / med / 1e9
            print(f"gloo {w} {nbytes} {med * 1e6:.1f} {alg:.3f} {alg * 2 * (w - 1) / w:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--bytes", default=f"{256 << 10},{4 << 20},{64 << 20}")
    p.add_argument("--port", type=int, default=29533)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    a.bytes = [int(b) for b in a.bytes.split(",")]
    if a.world < 2 or any(b <= 0 or b % 4 for b in a.bytes):
        p.error("--world at least 2, --bytes positive multiples of 4")
    mp.spawn(run, args=(a,), nprocs=a.world, join=True)
