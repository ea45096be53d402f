"""railgate: allreduce through railgated, over librailgate's C ABI (ctypes).

    import railgate
    comm = railgate.Comm("10.0.0.1", job=7, token=tok, rank=r, world=4)
    comm.allreduce(ptr, count, railgate.FP32)            # blocking, in place
    req = comm.allreduce_start(ptr, count, railgate.BF16)
    ...; req.wait()
    comm.close()

Buffers are raw addresses (a torch tensor's data_ptr(), a numpy array's
ctypes.data) or objects with the writable buffer protocol. railgate.torch
has the DDP communication hooks.

The library is found through $RAILGATE_LIBRARY (only there, when it is
set), else where meson built or installed it (railgate/_paths.py), else the
dynamic loader; ImportError says where it looked.
"""

import ctypes
import logging
import operator
import os
import sys
import threading

from . import _paths

FP32, BF16, FP16, INT32 = 0, 1, 2, 3
DTYPE_SIZE = {FP32: 4, BF16: 2, FP16: 2, INT32: 4}

OK, IN_PROGRESS = 0, 1
STATUS_NAMES = {
    0: "RG_OK", 1: "RG_IN_PROGRESS", -1: "RG_ERR_USAGE", -2: "RG_ERR_SYSTEM", -3: "RG_ERR_REFUSED",
    -4: "RG_ERR_RANK_FAILED", -5: "RG_ERR_ABORTED", -6: "RG_ERR_RAIL_DOWN", -7: "RG_ERR_DAEMON_GONE",
    -8: "RG_ERR_EXPIRED", -9: "RG_ERR_TIMEOUT",
}


class RailgateError(RuntimeError):
    """A failed railgate call: .status is the rg_status name, the message
    railgated's or the library's reason (a refused join, the dead rank...)."""

    def __init__(self, status, message):
        self.status = STATUS_NAMES.get(status, str(status))
        self.code = status
        super().__init__(f"railgate: {self.status}: {message}")


class _Config(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("server", ctypes.c_char_p),
        ("port", ctypes.c_uint16),
        ("transport", ctypes.c_char_p),
        ("rails", ctypes.c_char_p),
        ("job", ctypes.c_uint32),
        ("token", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("world", ctypes.c_uint32),
        ("dtype", ctypes.c_int),
        ("max_count", ctypes.c_uint64),
        ("retries", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("join_timeout_ms", ctypes.c_uint32),
        ("gid_index", ctypes.c_int32),
        ("dscp", ctypes.c_uint8),
        ("congestion_control", ctypes.c_uint8),
        ("peer_timeout_ms", ctypes.c_uint32),
        ("on_retry", ctypes.c_void_p),
        ("on_retry_ctx", ctypes.c_void_p),
        ("connect_timeout_ms", ctypes.c_uint32),
    ]


# rg_config.on_retry: void (*)(void *ctx, uint32_t rank, const char *line).
_ON_RETRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_char_p)
_log = logging.getLogger("railgate")


def _fit(name, value, ctype):
    """value as an integer that ctype holds: ctypes itself would wrap it
    silently (a port of 70000 is 4464, a count of -1 is 2^64 - 1)."""
    if isinstance(value, bool):
        raise TypeError(f"railgate: {name} must be an integer, not {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"railgate: {name} must be an integer, not {value!r}") from None
    bits = 8 * ctypes.sizeof(ctype)
    signed = ctype(-1).value == -1
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= v <= hi:
        raise ValueError(f"railgate: {name} {v} is out of range {lo}..{hi}")
    return v


def _log_retry(rank, line):
    _log.warning("rank %d: %s", rank, line)


class _Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (n, ctypes.c_uint64) for n in ("allreduces", "bytes", "retransmits", "recoveries", "timeout_retransmits",
                                       "tail_probes", "spurious_retransmits", "window_decreases", "ecn_marks")]


def _load():
    # $RAILGATE_LIBRARY alone when it is set: a wrong path is an error that
    # names it, not a fall back to some other librailgate.
    override = os.environ.get("RAILGATE_LIBRARY")
    failed = []
    for path in [override] if override else [_paths.LIBRARY, "librailgate.so.0"]:
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            failed.append(str(e) if path in str(e) else f"{path}: {e}")
    else:
        raise ImportError("railgate: cannot load librailgate (" + "; ".join(failed) + ")" +
                          (" from $RAILGATE_LIBRARY" if override else ""))
    vp, p = ctypes.c_void_p, ctypes.POINTER
    sigs = {
        "rg_config_init": (None, [p(_Config)]),
        "rg_version": (ctypes.c_char_p, [vp, vp, vp]),
        "rg_random_token": (ctypes.c_uint64, []),
        "rg_create": (ctypes.c_int, [p(_Config), p(vp)]),
        "rg_join": (ctypes.c_int, [vp]),
        "rg_leave": (ctypes.c_int, [vp]),
        "rg_abort": (ctypes.c_int, [vp, ctypes.c_char_p]),
        "rg_destroy": (None, [vp]),
        "rg_last_error": (ctypes.c_char_p, [vp]),
        "rg_allreduce": (ctypes.c_int, [vp, vp, vp, ctypes.c_size_t, ctypes.c_int]),
        "rg_allreduce_start": (ctypes.c_int, [vp, vp, vp, ctypes.c_size_t, ctypes.c_int, p(vp)]),
        "rg_allreduce_compressed": (ctypes.c_int, [vp, vp, ctypes.c_size_t, ctypes.c_int, ctypes.c_float]),
        "rg_allreduce_compressed_start": (ctypes.c_int, [vp, vp, ctypes.c_size_t, ctypes.c_int, ctypes.c_float, p(vp)]),
        "rg_test": (ctypes.c_int, [vp]),
        "rg_wait": (ctypes.c_int, [vp]),
        "rg_request_error": (ctypes.c_char_p, [vp]),
        "rg_request_free": (None, [vp]),
        "rg_get_stats": (ctypes.c_int, [vp, p(_Stats)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    if ctypes.sizeof(_Config) != _config_size(lib):
        raise ImportError("railgate: this package and librailgate disagree on rg_config (rebuild or reinstall both)")
    return lib


def _config_size(lib):
    c = _Config()
    lib.rg_config_init(ctypes.byref(c))
    return c.struct_size


_lib = _load()


def version():
    """The library's version, "0.1.0"."""
    return _lib.rg_version(None, None, None).decode()


def random_token():
    """A random, never zero, 64-bit job token."""
    return _lib.rg_random_token()


# The buffer-protocol element formats each dtype's elements may come in (a
# byte-order prefix of native or little, '@', '=' or '<', aside). Bytes
# ('B', 'b', 'c') are untyped and go as any dtype; bfloat16 has no format
# of its own and travels as 16-bit integers.
_FORMATS = {FP32: ("f",), BF16: ("H", "h"), FP16: ("e", "H", "h"), INT32: ("i", "I", "l", "L")}
_NAMES = {FP32: "FP32", BF16: "BF16", FP16: "FP16", INT32: "INT32"}


def _element_fits(mv, dtype):
    fmt = mv.format
    order = fmt[:1] if fmt[:1] in ("@", "=", "<", ">", "!") else "@"
    fmt = fmt[1:] if fmt[:1] == order else fmt
    if fmt in ("B", "b", "c") or dtype not in _FORMATS:   # an unknown dtype: the library refuses it
        return True
    native = order in ("@", "=") or (order == "<") == (sys.byteorder == "little")
    return native and fmt in _FORMATS[dtype] and mv.itemsize == DTYPE_SIZE[dtype]


def _address(buf, nbytes=0, what="the buffer", dtype=None):
    """(address, view) of a buffer: an int (the caller vouches for its size
    and type; no view), or an object with the writable buffer protocol that
    holds nbytes at least, of dtype's elements or of bytes. The view, while
    held, keeps the buffer where it is: resizing a bytearray or an
    array.array (which moves it) raises BufferError instead of leaving the
    library writing into freed memory."""
    if isinstance(buf, int):
        return buf, None
    mv = memoryview(buf)
    if mv.readonly:
        raise ValueError(f"railgate: {what} is read-only")
    if not mv.c_contiguous:
        raise ValueError(f"railgate: {what} is not contiguous")
    if dtype is not None and not _element_fits(mv, dtype):
        raise ValueError(f"railgate: {what} holds elements of format {mv.format!r} ({mv.itemsize} bytes), "
                         f"not {_NAMES.get(dtype, dtype)}'s: summed as {_NAMES.get(dtype, dtype)} they would be garbage")
    if mv.nbytes < nbytes:
        raise ValueError(f"railgate: {what} holds {mv.nbytes} bytes; the allreduce reads and writes {nbytes}")
    return ctypes.addressof(ctypes.c_char.from_buffer(mv)), mv


def _operands(buf, out, count, dtype, bytes_each=None, dtype_name="dtype"):
    """((src, dst, count, dtype), views) for the library: integers that fit
    their C types, buffers that hold count elements (else the library would
    read and write past them), and the views to hold while it uses them. An
    unknown dtype is left to the library to refuse."""
    count, dtype = _fit("count", count, ctypes.c_size_t), _fit(dtype_name, dtype, ctypes.c_int)
    nbytes = count * (bytes_each or DTYPE_SIZE.get(dtype, 0))
    element = FP32 if bytes_each else dtype   # the compressed calls' buffers are float32
    src, src_view = _address(buf, nbytes, dtype=element)
    dst, dst_view = (src, None) if out is None else _address(out, nbytes, "out", element)
    return (src, dst, count, dtype), (src_view, dst_view)


# Requests dropped before they ended, as (handle, buffers): the library
# still writes into those buffers, so they are held until it has finished
# (looked at on every call of a communicator, and when one closes). A lock
# that __del__ may take again on its own thread (a collection inside
# _sweep).
_orphans = []
_orphans_lock = threading.RLock()


def _sweep():
    """Frees the dropped requests that have ended; their buffers go."""
    with _orphans_lock:
        pending = _orphans[:]
        del _orphans[:len(pending)]
    # Requests dropped meanwhile (a collection here) go on the list itself.
    still = []
    for h, keep in pending:
        if _lib.rg_test(h) == IN_PROGRESS:
            still.append((h, keep))
        else:
            _lib.rg_request_free(h)
    with _orphans_lock:
        _orphans.extend(still)


class Request:
    """An asynchronous allreduce: test() and wait(). Dropped unfinished, it
    keeps its buffers alive until the allreduce ends (as if waited for
    later), so that a temporary buffer is not freed under the library."""

    def __init__(self, handle, keep):
        self._h = ctypes.c_void_p(handle)
        self._keep = keep   # the buffers' views (and what `keep` named), held until the request ends
        self.status = IN_PROGRESS

    def test(self):
        """True once finished (raises RailgateError if it failed)."""
        if self.status == IN_PROGRESS:
            self.status = _lib.rg_test(self._h)
        return self._result() if self.status != IN_PROGRESS else False

    def wait(self):
        """Blocks (without the GIL) until finished; raises RailgateError if it failed."""
        if self.status == IN_PROGRESS:
            self.status = _lib.rg_wait(self._h)
        return self._result()

    def _result(self):
        self._keep = None   # ended: the buffers may be resized again
        if self.status != OK:
            raise RailgateError(self.status, _lib.rg_request_error(self._h).decode(errors="replace"))
        return True

    def __del__(self):
        if getattr(self, "_h", None) and _lib:
            if self.status == IN_PROGRESS and _lib.rg_test(self._h) == IN_PROGRESS:
                with _orphans_lock:
                    _orphans.append((self._h, self._keep))
            else:
                _lib.rg_request_free(self._h)
            self._h = None


class Comm:
    """One rank of a job on railgated (rg_comm). Joins at construction."""

    def __init__(self, server, job, token, rank, world, transport="udp", rails=None, port=0,
                 dtype=FP32, max_count=0, retries=0, timeout_ms=60000, join_timeout_ms=5000, gid_index=-1,
                 dscp=0, congestion_control="queue", peer_timeout_ms=0, on_retry=_log_retry,
                 connect_timeout_ms=0):
        """on_retry(rank, line) is told each failure the communicator recovers
        from (or tries to), as it happens (with retries): what failed and what
        it does, then how that went, and each verbs connect attempt that got
        no answer. By default a warning on the "railgate" logger; None: quiet.
        It runs on the library's thread (the constructor's for its first
        connect) and must not call the communicator. connect_timeout_ms
        (verbs): how long each rail's connect may take, in attempts (0: the
        library's 5000)."""
        c = _Config()
        _lib.rg_config_init(ctypes.byref(c))
        self._strings = [s.encode() if s is not None else None for s in (server, transport, rails)]
        c.server, c.transport, c.rails = self._strings
        fields = dict(_Config._fields_)
        for name, v in (("port", port), ("job", job), ("token", token), ("rank", rank), ("world", world),
                        ("dtype", dtype), ("max_count", max_count), ("retries", retries), ("timeout_ms", timeout_ms),
                        ("join_timeout_ms", join_timeout_ms), ("gid_index", gid_index), ("dscp", dscp),
                        ("peer_timeout_ms", peer_timeout_ms), ("connect_timeout_ms", connect_timeout_ms)):
            v = _fit(name, v, fields[name])
            if v or name not in ("port", "peer_timeout_ms", "connect_timeout_ms"):  # 0: the library's default
                setattr(c, name, v)
        # False/"off", True/"delay" (round trip, queue depth, marks) or
        # "queue" (railgated's queue depth, marks and timeouts in a row only).
        modes = {False: 0, "off": 0, True: 1, "delay": 1, "queue": 2}
        if congestion_control not in modes:
            raise ValueError(f"congestion_control: False, True, 'off', 'delay' or 'queue', not {congestion_control!r}")
        c.congestion_control = modes[congestion_control]
        self._on_retry = None  # the C callback, kept alive as long as the communicator
        if on_retry is not None:
            def told(_ctx, rank, line, fn=on_retry):
                fn(rank, line.decode(errors="replace"))
            self._on_retry = _ON_RETRY(told)
            c.on_retry = ctypes.cast(self._on_retry, ctypes.c_void_p)
        h = ctypes.c_void_p()
        st = _lib.rg_create(ctypes.byref(c), ctypes.byref(h))
        if st != OK:
            raise RailgateError(st, _lib.rg_last_error(None).decode(errors="replace"))
        self._h = h
        self.rank, self.world = rank, world
        self._check(_lib.rg_join(self._h))

    def _live(self):
        """The handle; ValueError once closed (as a closed file's methods raise)."""
        if not self._h:
            raise ValueError("railgate: the communicator is closed")
        if _orphans:
            _sweep()
        return self._h

    def _check(self, st):
        if st != OK:
            raise RailgateError(st, _lib.rg_last_error(self._h).decode(errors="replace"))

    def allreduce(self, buf, count, dtype=FP32, out=None):
        """Sums count elements of dtype from every rank into out (default: in place)."""
        args, views = _operands(buf, out, count, dtype)   # held through the call (another thread may resize)
        self._check(_lib.rg_allreduce(self._live(), *args))

    def allreduce_start(self, buf, count, dtype=FP32, out=None, keep=None):
        """Queues an allreduce; returns a Request. `keep`: objects to hold alive until it ends."""
        r = ctypes.c_void_p()
        args, views = _operands(buf, out, count, dtype)
        self._check(_lib.rg_allreduce_start(self._live(), *args, ctypes.byref(r)))
        return Request(r.value, (views, keep))

    def allreduce_compressed(self, buf, count, wire=BF16, divisor=1.0):
        """A float32 buffer in place: divided by divisor, summed as `wire` (BF16, FP16 or FP32)."""
        (src, _, count, wire), views = _operands(buf, None, count, wire, 4, "wire")  # a float32 buffer
        self._check(_lib.rg_allreduce_compressed(self._live(), src, count, wire, divisor))

    def allreduce_compressed_start(self, buf, count, wire=BF16, divisor=1.0, keep=None):
        """The same, asynchronous (the conversions run on the library's thread); a Request."""
        r = ctypes.c_void_p()
        (src, _, count, wire), views = _operands(buf, None, count, wire, 4, "wire")  # a float32 buffer
        self._check(_lib.rg_allreduce_compressed_start(self._live(), src, count, wire, divisor, ctypes.byref(r)))
        return Request(r.value, (views, keep))

    def abort(self, why=""):
        """Ends the job for every rank (theirs fail with RG_ERR_ABORTED and `why`)."""
        self._check(_lib.rg_abort(self._live(), why.encode()))

    def stats(self):
        """The communicator's counters (rg_stats) as a dict; those an older
        librailgate does not fill are left out."""
        s = _Stats(struct_size=ctypes.sizeof(_Stats))
        self._check(_lib.rg_get_stats(self._live(), ctypes.byref(s)))
        return {n: getattr(s, n) for n, t in _Stats._fields_[1:]
                if getattr(_Stats, n).offset + ctypes.sizeof(t) <= s.struct_size}

    def close(self):
        """Leaves the job and frees the communicator."""
        if self._h:
            _lib.rg_destroy(self._h)   # finishes what is queued
            self._h = None
            if _orphans:
                _sweep()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None):
            self.close()
