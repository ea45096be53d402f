"""DistributedDataParallel communication hooks that sum gradients through
railgated instead of the process group:

    import railgate.torch as rgt
    model = DistributedDataParallel(model)
    model.register_comm_hook(rgt.State(server="10.0.0.1"), rgt.allreduce_hook)

Each gradient bucket goes to railgate asynchronously (backward goes on
computing the next bucket) and comes back as a torch.futures.Future. The
hooks average as DDP does: the bucket divided by the world size, then
summed. Sums are bit-exact and in rank order: the same on every rank and
run after run.

bf16_hook and fp16_hook send the bucket as bfloat16 / float16 (like
fp16_compress_hook) and railgated sums those types as such. The division
and the conversions run in librailgate's thread, not in backward's.

The job id and a random token go from rank 0 to the others through the
process group's store: the user gives only the server's address.
"""

import os
import queue
import threading

import torch
import torch.distributed as dist

import railgate

_states = 0   # States made in this process: each gets its own store keys


class State:
    """What the hooks need: the communicator of this rank and the thread
    that completes the futures. Every rank makes one, in the same order.

    server      railgated's rail-0 address
    transport   "udp" (kernel sockets, default), "dpdk" (with rails) or "verbs"
    job, token  by default rank 0 picks a free-looking job id and a random
                token and shares them through the process group's store
    retries     re-joins after a recoverable failure (railgated restarted...)
    congestion_control  "queue" (default): each rail's window follows
                railgated's queue depth, ECN marks and timeouts, up to the slot
                pool; True or "delay": also the measured round trip; False:
                the slot pool (see the guide)
    """

    def __init__(self, server, process_group=None, transport="udp", rails=None, port=0, job=None, token=None,
                 retries=0, timeout_ms=60000, join_timeout_ms=30000, congestion_control="queue"):
        global _states
        _states += 1
        group = process_group or dist.group.WORLD
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        if job is None or token is None:
            job, token = _rendezvous(self.rank, job, token, _states)
        self.job, self.token = job, token
        self.comm = railgate.Comm(server, job=job, token=token, rank=self.rank, world=self.world,
                                  transport=transport, rails=rails, port=port, retries=retries,
                                  timeout_ms=timeout_ms, join_timeout_ms=join_timeout_ms,
                                  congestion_control=congestion_control)
        self._pending = queue.Queue()
        self._waiter = threading.Thread(target=self._complete, name="railgate-waiter", daemon=True)
        self._waiter.start()

    def submit(self, tensor, wire, divisor):
        """Averages a contiguous float32 CPU tensor in place across the
        ranks: divided by `divisor`, summed as `wire` (railgate.FP32, BF16
        or FP16), back to float32; the division and conversions run on the
        library's thread. Returns a Future of the tensor."""
        if tensor.dtype != torch.float32 or not tensor.is_contiguous() or tensor.device.type != "cpu":
            raise ValueError("railgate: the bucket must be a contiguous float32 CPU tensor")
        fut = torch.futures.Future()
        try:
            req = self.comm.allreduce_compressed_start(tensor.data_ptr(), tensor.numel(), wire, float(divisor),
                                                       keep=tensor)
        except railgate.RailgateError as e:
            fut.set_exception(e)
            return fut
        self._pending.put((req, fut, tensor))
        return fut

    def _complete(self):
        # In submission order (railgate runs them in that order).
        while True:
            item = self._pending.get()
            if item is None:
                return
            req, fut, tensor = item
            try:
                req.wait()    # ctypes drops the GIL while it waits
            except railgate.RailgateError as e:
                fut.set_exception(e)
                continue
            fut.set_result(tensor)

    def close(self):
        """Leaves the job (after the buckets in flight)."""
        if self.comm:
            self._pending.put(None)
            self._waiter.join()
            self.comm.close()
            self.comm = None


def _rendezvous(rank, job, token, n):
    store = dist.distributed_c10d._get_default_store()
    key = f"railgate/state{n}"
    if rank == 0:
        # Ids job..job+3 (one per dtype) from a 2^30 space: another job's
        # id is unlikely, and its token would keep the two apart anyway.
        job = job if job is not None else 1 + int.from_bytes(os.urandom(4), "little") % (2**30)
        token = token if token is not None else railgate.random_token()
        store.set(key, f"{job}:{token}")
    else:
        job, token = (int(x) for x in store.get(key).decode().split(":"))
    return job, token


def allreduce_hook(state, bucket):
    """Averages the bucket in float32 through railgate (DDP's allreduce:
    divided by the world size, then summed)."""
    return state.submit(bucket.buffer(), railgate.FP32, state.world)


def bf16_hook(state, bucket):
    """Averages the bucket as bfloat16 on the wire: divided by the world
    size in float32, rounded to bf16, summed as bf16 by railgated."""
    return state.submit(bucket.buffer(), railgate.BF16, state.world)


def fp16_hook(state, bucket):
    """Averages the bucket as float16 on the wire (as bf16_hook)."""
    return state.submit(bucket.buffer(), railgate.FP16, state.world)
