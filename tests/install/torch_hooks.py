#!/usr/bin/env python3
"""railgate.torch's hooks called as DDP calls them, on every bucket type they
take, each result checked bit for bit against the same average computed
here from every rank's input:

  allreduce_hook  float32: divided by W, summed in float32 in rank order;
                  bfloat16 / float16: divided by W in that type, widened
                  exactly, summed in float32 in rank order and rounded
                  once to the type (railgated's 16-bit sum);
  bf16_hook       float32 as bfloat16 on the wire, back to float32;
  fp16_hook       float32 as float16 on the wire, back to float32.

Several buckets are in flight at once, as in a backward pass. A bucket the
hooks do not take (a 16-bit one through the other 16-bit hook, int64)
fails its future with a ValueError, as does any bucket after
State.close(). CPU buckets always; CUDA buckets too
where torch sees a device (they go through pinned host memory).

  torch_hooks.py --server IP --world W [--groups G]

With --groups, the ranks form G process groups of W/G consecutive ranks,
each with a State of its own (hybrid parallel training's data-parallel
groups): each group's averages must be its own members'.
"""

import argparse
import datetime
import socket
import sys
import time


class Bucket:
    """What the hooks use of DDP's GradBucket."""

    def __init__(self, tensor, index):
        self._t, self._i = tensor, index

    def buffer(self):
        return self._t

    def index(self):
        return self._i


def inputs(torch, rank, n, dtype):
    g = torch.Generator().manual_seed(1000 + rank)
    # Magnitudes over several binades, and some exact zeros and negatives.
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-6, 7, (n,), generator=g).float())
    x[::97] = 0
    return x.to(dtype)


def expected(torch, world, n, dtype, wire, ranks=None):
    """The average as railgate defines it, from every rank's input (the
    global ranks of a process group's members, in group order)."""
    xs = [inputs(torch, q, n, dtype) for q in (ranks or range(world))]
    if dtype == torch.float32 and wire != torch.float32:
        ys = [(x / world).to(wire) for x in xs]   # narrowed after the division
    else:
        ys = [x / world for x in xs]              # in the bucket's own type
    # railgated widens 16-bit terms exactly, sums in float32 in rank order
    # and rounds once to the wire type.
    acc = ys[0].float()
    for y in ys[1:]:
        acc = acc + y.float()
    return acc.to(ys[0].dtype).to(dtype)


def rank_main(rank, a, port, failures):
    import torch
    import torch.distributed as dist
    import railgate
    import railgate.torch as rgt

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=60))
    f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
    cases = [  # hook, bucket dtype, wire dtype
        (rgt.allreduce_hook, f32, f32), (rgt.bf16_hook, f32, bf16), (rgt.fp16_hook, f32, f16),
        (rgt.allreduce_hook, bf16, bf16), (rgt.allreduce_hook, f16, f16),
        (rgt.bf16_hook, bf16, bf16), (rgt.fp16_hook, f16, f16),
    ]
    if a.groups > 1:
        failures.put((rank, groups_main(torch, dist, rgt, rank, a, cases)))
        dist.destroy_process_group()
        return
    state = rgt.State(server=a.server, timeout_ms=30000)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    bad = []
    for dev in devices:
        for n in (1, 4097, 100003):
            # Every case's bucket in flight before the first is waited for.
            futs = []
            for i, (hook, dt, wire) in enumerate(cases):
                t = inputs(torch, rank, n, dt).to(dev)
                futs.append((hook, dt, wire, t, hook(state, Bucket(t, i))))
            for hook, dt, wire, t, fut in futs:
                out = fut.wait()
                want = expected(torch, a.world, n, dt, wire)
                what = f"{dev} {hook.__name__} {dt} n={n}"
                if out is not t:
                    bad.append(f"{what}: the future's value is not the bucket")
                elif out.dtype != dt or not torch.equal(out.cpu(), want):
                    diff = (out.cpu().float() - want.float()).abs().max().item()
                    bad.append(f"{what}: differs from the expected average (max |diff| {diff:.3g})")
        print(f"rank {rank}: {dev}: {len(cases)} hook/bucket cases at 1, 4097 and 100003 elements", flush=True)
        # Buckets the hooks refuse: the future fails, nothing is sent.
        for hook, t in ((rgt.bf16_hook, torch.zeros(8, dtype=f16, device=dev)),
                        (rgt.fp16_hook, torch.zeros(8, dtype=bf16, device=dev)),
                        (rgt.allreduce_hook, torch.zeros(8, dtype=torch.int64, device=dev))):
            try:
                hook(state, Bucket(t, 99)).wait()
                bad.append(f"{dev} {hook.__name__} took a {t.dtype} bucket")
            except ValueError as e:
                if "railgate" not in str(e):
                    bad.append(f"{dev} {hook.__name__} {t.dtype}: unclear error {e}")
    if not torch.cuda.is_available():
        print(f"rank {rank}: no CUDA device here: the CUDA buckets were not tried", flush=True)
    state.close()
    # After close: the future fails, nothing is sent.
    try:
        rgt.allreduce_hook(state, Bucket(torch.zeros(8), 0)).wait()
        bad.append("a closed State took a bucket")
    except ValueError as e:
        if "railgate: this State is closed" not in str(e):
            bad.append(f"a closed State: unclear error {e}")
    dist.destroy_process_group()
    failures.put((rank, bad))


def groups_main(torch, dist, rgt, rank, a, cases):
    """Data-parallel groups of consecutive ranks, a State each (as hybrid
    parallel training makes them): every group's averages are its own
    members', bit-exact."""
    size = a.world // a.groups
    members = [list(range(g * size, (g + 1) * size)) for g in range(a.groups)]
    groups = [dist.new_group(m) for m in members]   # every rank makes every group, in order
    mine = members[rank // size]
    if rank != mine[0]:
        time.sleep(1)   # the groups' rank 0s have both published their job before anyone reads
    state = rgt.State(server=a.server, process_group=groups[rank // size], timeout_ms=30000)
    bad, n = [], 4097
    futs = []
    for i, (hook, dt, wire) in enumerate(cases):
        t = inputs(torch, rank, n, dt)
        futs.append((hook, dt, wire, t, hook(state, Bucket(t, i))))
    for hook, dt, wire, t, fut in futs:
        try:
            out = fut.wait()
        except Exception as e:   # the job another group's State took
            bad.append(f"group {mine}: {hook.__name__} {dt}: {e}")
            continue
        if not torch.equal(out, expected(torch, size, n, dt, wire, mine)):
            bad.append(f"group {mine}: {hook.__name__} {dt} n={n}: not the group's average")
    state.close()
    print(f"rank {rank}: group {mine} (job {state.job}): {len(cases)} hook/bucket cases", flush=True)
    return bad


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--groups", type=int, default=1, help="process groups of world/groups consecutive ranks")
    a = p.parse_args()
    import torch
    import torch.multiprocessing as mp
    # Forked where there is no CUDA device (the ranks inherit the imported
    # torch: seconds sooner), spawned where there is, as CUDA needs.
    ctx = mp.get_context("spawn" if torch.cuda.is_available() else "fork")
    failures = ctx.SimpleQueue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=rank_main, args=(r, a, port, failures)) for r in range(a.world)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join()
    bad, seen = [], 0
    while not failures.empty():
        rank, b = failures.get()
        seen += 1
        bad += [f"rank {rank}: {x}" for x in b]
    if any(pr.exitcode != 0 for pr in procs) or seen != a.world:
        print(f"torch_hooks: a rank failed (exit codes {[pr.exitcode for pr in procs]})")
        return 1
    for x in bad:
        print("FAIL:", x)
    if bad:
        return 1
    if a.groups > 1:
        print(f"ok: {a.world} ranks in {a.groups} process groups, a State each: every group's average its own")
    else:
        print(f"ok: {a.world} ranks: every hook's average bit-exact; refused buckets fail their futures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
