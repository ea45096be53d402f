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

bf16_hook and fp16_hook send a float32 bucket as bfloat16 / float16 (like
fp16_compress_hook) and railgated sums those types as such. The division
and the conversions run in librailgate's thread, not in backward's.

Buckets of bfloat16 or float16 (a model trained in that type) are summed in
their own type by allreduce_hook (and by the hook of the same type),
divided by the world size in that type first, as DDP's allreduce does.

CUDA buckets go through pinned host memory: the division, and the
narrowing of a compressed hook, run on the device first, so only the wire's
bytes cross PCIe; the result is copied back (and widened) on the device
before the future completes.

The job id and a random token go from rank 0 to the others through the
process group's store: the user gives only the server's address.
"""

import hashlib
import os
import queue
import threading

import torch
import torch.distributed as dist

import railgate

_states = {}   # States made in this process, by group (its global ranks): each gets its own store key


class State:
    """What the hooks need: the communicator of this rank and the thread
    that completes the futures. Every rank of the group makes one, in the
    same order as the group's other States.

    server      railgated's rail-0 address
    transport   "udp" (kernel sockets, default), "dpdk" (with rails) or "verbs"
    job, token  by default rank 0 picks a free-looking job id and a random
                token and shares them through the process group's store
    retries     re-joins after a recoverable failure (railgated restarted...)
    congestion_control  "queue" (default): each rail's window follows
                railgated's queue depth, ECN marks and timeouts, up to the slot
                pool; True or "delay": also the measured round trip; False:
                the slot pool (see the guide)
    peer_timeout_ms  how long every rail may stay silent before railgated is
                taken for gone (default: the library's, 1000)
    connect_timeout_ms  verbs: how long each rail's connect may take, in
                attempts of 1, 2, 4 ... s (default: the library's, 5000)
    gid_index   verbs: the source GID index on every rail (-1, the default:
                RAILGATE_IB_GID_INDEX in the environment, else the RoCEv2 GID
                of the rail's address; NCCL_IB_GID_INDEX's role)
    on_retry    on_retry(rank, line): each recovery as it happens (with
                retries); default: a warning on the "railgate" logger; None:
                quiet (railgate.Comm)
    """

    def __init__(self, server, process_group=None, transport="udp", rails=None, port=0, job=None, token=None,
                 retries=0, timeout_ms=60000, join_timeout_ms=30000, congestion_control="queue", peer_timeout_ms=0,
                 gid_index=-1, on_retry=railgate._log_retry, connect_timeout_ms=0):
        group = process_group or dist.group.WORLD
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        if job is None or token is None:
            members = tuple(dist.get_process_group_ranks(group))
            _states[members] = _states.get(members, 0) + 1
            job, token = _rendezvous(self.rank, job, token, _states[members], members)
        self.job, self.token = job, token
        self.comm = railgate.Comm(server, job=job, token=token, rank=self.rank, world=self.world,
                                  transport=transport, rails=rails, port=port, retries=retries,
                                  timeout_ms=timeout_ms, join_timeout_ms=join_timeout_ms,
                                  congestion_control=congestion_control, peer_timeout_ms=peer_timeout_ms,
                                  gid_index=gid_index, on_retry=on_retry, connect_timeout_ms=connect_timeout_ms)
        self._pending = queue.Queue()
        self._staging = {}   # CUDA buckets' pinned host buffers, by (bucket index, dtype, numel)
        self._waiter = threading.Thread(target=self._complete, name="railgate-waiter", daemon=True)
        self._waiter.start()

    def submit(self, tensor, wire, divisor, key=None):
        """Averages a contiguous float32, bfloat16 or float16 tensor (CPU or
        CUDA) in place across the ranks: divided by `divisor` and summed as
        `wire` (railgate.FP32, BF16, FP16; None: the tensor's own type). A
        float32 tensor may go as a 16-bit wire type and come back float32;
        a 16-bit one is summed in its own type. `key` names the tensor's
        pinned staging buffer (CUDA; DDP's bucket index). Returns a Future
        of the tensor."""
        fut = torch.futures.Future()
        try:
            if self.comm is None:
                raise ValueError("railgate: this State is closed")
            if tensor.dtype not in _WIRE or not tensor.is_contiguous() or tensor.device.type not in ("cpu", "cuda"):
                raise ValueError(f"railgate: the bucket must be a contiguous float32, bfloat16 or float16 tensor "
                                 f"on the CPU or a CUDA device, not {tensor.dtype} on {tensor.device}")
            own = _WIRE[tensor.dtype]
            wire = own if wire is None else wire
            if own != railgate.FP32 and wire != own:
                raise ValueError(f"railgate: a {tensor.dtype} bucket is summed as such (allreduce_hook), "
                                 f"not as {_NAMES[wire]}")
            done = None
            if tensor.device.type == "cuda":
                req, done = self._submit_cuda(tensor, wire, divisor, key)
            elif own == railgate.FP32:
                req = self.comm.allreduce_compressed_start(tensor.data_ptr(), tensor.numel(), wire, float(divisor),
                                                           keep=tensor)
            else:
                if divisor != 1:
                    tensor.div_(divisor)
                req = self.comm.allreduce_start(tensor.data_ptr(), tensor.numel(), own, keep=tensor)
        except (railgate.RailgateError, ValueError, RuntimeError) as e:   # RuntimeError: the device's
            fut.set_exception(e)
            return fut
        self._pending.put((req, fut, tensor, done))
        return fut

    def _submit_cuda(self, tensor, wire, divisor, key):
        # On the device: the division, and the narrowing to the wire type.
        if wire == _WIRE[tensor.dtype]:
            dev = tensor.div_(divisor) if divisor != 1 else tensor
        else:
            dev = tensor.div(divisor).to(_DTYPE[wire])
        host = self._pinned(key, dev)
        host.copy_(dev.view(-1))   # waits for the kernels that made the gradients
        req = self.comm.allreduce_start(host.data_ptr(), host.numel(), wire, keep=host)

        def done():   # on the waiter thread, once the sum is in host
            with torch.cuda.device(tensor.device):
                dev.view(-1).copy_(host)
                if dev is not tensor:
                    tensor.copy_(dev)   # widened back to float32
                torch.cuda.current_stream().synchronize()
        return req, done

    def _pinned(self, key, like):
        # Kept per bucket index (DDP's buckets are the same every step and
        # all come back within it); without a key, a buffer of its own.
        k = (key, like.dtype, like.numel())
        buf = self._staging.get(k) if key is not None else None
        if buf is None:
            buf = torch.empty(like.numel(), dtype=like.dtype, pin_memory=True)
            if key is not None:
                self._staging[k] = buf
        return buf

    def _complete(self):
        # In submission order (railgate runs them in that order).
        while True:
            item = self._pending.get()
            if item is None:
                return
            req, fut, tensor, done = item
            try:
                req.wait()    # ctypes drops the GIL while it waits
                if done:
                    done()
            except Exception as e:   # railgate's error, or the device's
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


def _rendezvous(rank, job, token, n, members):
    # The default store is the whole world's: the key names the group by
    # its members' global ranks, so that groups that each make their n-th
    # State (hybrid parallelism's data-parallel groups) do not read one
    # another's job and token.
    store = dist.distributed_c10d._get_default_store()
    key = f"railgate/state{n}/" + hashlib.sha256(",".join(map(str, members)).encode()).hexdigest()[:16]
    if rank == 0:
        # Ids job..job+3 (one per dtype) from a 2^30 space: another job's
        # id is unlikely, and its token would keep the two apart anyway.
        job = job if job is not None else 1 + int.from_bytes(os.urandom(4), "little") % (2**30)
        token = token if token is not None else railgate.random_token()
        store.set(key, f"{job}:{token}")
    else:
        job, token = (int(x) for x in store.get(key).decode().split(":"))
    return job, token


_WIRE = {torch.float32: railgate.FP32, torch.bfloat16: railgate.BF16, torch.float16: railgate.FP16}
_DTYPE = {w: t for t, w in _WIRE.items()}
_NAMES = {railgate.FP32: "float32", railgate.BF16: "bfloat16", railgate.FP16: "float16"}


def _index(bucket):
    return bucket.index() if hasattr(bucket, "index") else None


def allreduce_hook(state, bucket):
    """Averages the bucket through railgate in its own type (float32,
    bfloat16 or float16), as DDP's allreduce: divided by the world size,
    then summed."""
    return state.submit(bucket.buffer(), None, state.world, _index(bucket))


def bf16_hook(state, bucket):
    """Averages a float32 bucket as bfloat16 on the wire: divided by the
    world size in float32, rounded to bf16, summed as bf16 by railgated,
    widened back. A bfloat16 bucket is summed as such."""
    return state.submit(bucket.buffer(), railgate.BF16, state.world, _index(bucket))


def fp16_hook(state, bucket):
    """Averages a float32 bucket as float16 on the wire (as bf16_hook). A
    float16 bucket is summed as such."""
    return state.submit(bucket.buffer(), railgate.FP16, state.world, _index(bucket))
