"""One rank of dpdk_workers.sh's C-ABI job: every dtype through one
railgate.Comm, in turns (fp32, bf16, fp16, int32, then fp32 again), so
that a dpdk communicator's four jobs share its one EAL and ports. Each
rank's element i is a small integer (exact in every dtype); the sums are
checked bit for bit.
  python3 dtypes_on_dpdk.py RANK WORLD JOB TRANSPORT [RAILS]
"""
import array
import os
import struct
import sys

import railgate

rank, world, job, transport = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rails = sys.argv[5] if len(sys.argv) > 5 else None
token = int(os.environ["RAILGATE_TOKEN"])
N = 20011  # odd: a short last chunk on every rail


def value(r, i):
    return (i * 7 + r * 3) % 61 - 30


def bits16(x, half):
    """The fp16 or bf16 encoding of a small integer (exact in both)."""
    if half:
        return struct.unpack("<H", struct.pack("<e", float(x)))[0]
    return struct.unpack("<I", struct.pack("<f", float(x)))[0] >> 16


comm = railgate.Comm("198.18.0.1", job, token, rank, world, transport=transport, rails=rails,
                     max_count=N, timeout_ms=20000)
want = [sum(value(r, i) for r in range(world)) for i in range(N)]
runs = [("fp32", railgate.FP32, array.array("f", [float(value(rank, i)) for i in range(N)]),
         array.array("f", [float(w) for w in want])),
        ("bf16", railgate.BF16, array.array("H", [bits16(value(rank, i), False) for i in range(N)]),
         array.array("H", [bits16(w, False) for w in want])),
        ("fp16", railgate.FP16, array.array("H", [bits16(value(rank, i), True) for i in range(N)]),
         array.array("H", [bits16(w, True) for w in want])),
        ("int32", railgate.INT32, array.array("i", [value(rank, i) for i in range(N)]),
         array.array("i", want))]
runs.append(("fp32 again", railgate.FP32, array.array("f", runs[0][2]), runs[0][3]))
for name, dt, buf, expect in runs:
    comm.allreduce(buf, N, dt)
    bad = [i for i in range(N) if buf[i] != expect[i]]
    if bad:
        sys.exit(f"rank {rank}: {name}: {len(bad)} wrong elements, first {bad[0]}: {buf[bad[0]]} != {expect[bad[0]]}")
stats = comm.stats()
comm.close()
print(f"ok: rank {rank} ({transport}): fp32, bf16, fp16, int32, fp32 through one communicator, "
      f"{N} elements bit-exact, {stats['allreduces']} allreduces")
