/* railgate.h: the worker library's C ABI (librailgate).
 *
 * A communicator is one rank of a job on railgated: create it with the
 * server's address and the job (id, secret token, rank, world), join, then
 * allreduce (sum) buffers through railgated, blocking or asynchronously:
 *
 *     rg_config c;
 *     rg_config_init(&c);
 *     c.server = "10.0.0.1"; c.job = 7; c.token = token; c.rank = r; c.world = 4;
 *     rg_comm *comm;
 *     if (rg_create(&c, &comm) != RG_OK) { puts(rg_last_error(NULL)); ... }
 *     if (rg_join(comm) != RG_OK) { puts(rg_last_error(comm)); ... }
 *     rg_allreduce(comm, buf, buf, n, RG_FP32);          // in place
 *     rg_request *q;
 *     rg_allreduce_start(comm, in, out, n, RG_BF16, &q); // out of place, asynchronous
 *     ... rg_test(q) == RG_IN_PROGRESS ...; rg_wait(q); rg_request_free(q);
 *     rg_destroy(comm);                                   // leaves the job
 *
 * Semantics:
 * - Every rank of a job must issue the same allreduces (count, dtype) in
 *   the same order, as with MPI and NCCL. A communicator runs them one at a
 *   time in the order they were submitted, on its own progress thread (an
 *   asynchronous one) or on the calling thread (a blocking one with nothing
 *   queued before it). Functions may be called from any thread.
 * - Results are bit-exact and in rank order: element i is
 *   ((x0[i] + x1[i]) + x2[i]) + ..., the same on every rank, run after run.
 *   fp16 and bf16 are summed as such on the server (no fp32 round trip).
 * - A job carries one dtype on the wire. The communicator joins job id
 *   `job + dtype` (fp32: job, bf16: job+1, fp16: job+2, int32: job+3) the
 *   first time it uses a dtype; rg_join joins config.dtype's at once. With
 *   the dpdk transport (one EAL per process) those jobs share the
 *   communicator's ports.
 * - A failed allreduce (a rank died, railgated refused or went away, a
 *   timeout) fails every later one with the same status, unless
 *   config.retries lets the library re-join and run it again.
 * - A communicator and its requests belong to the process that made them.
 *   In a child it forks (a data loader's workers...) every call on them is
 *   RG_ERR_USAGE, said in rg_last_error(NULL), and rg_destroy frees and
 *   sends nothing, so the parent's job goes on; the child makes its own.
 * - No function throws or aborts; a status below zero names the failure
 *   and rg_last_error() / rg_request_error() say it in words.
 */
#ifndef RAILGATE_H
#define RAILGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RAILGATE_VERSION_MAJOR 0
#define RAILGATE_VERSION_MINOR 2
#define RAILGATE_VERSION_PATCH 0

typedef struct rg_comm rg_comm;
typedef struct rg_request rg_request;

typedef enum rg_status {
    RG_OK = 0,
    RG_IN_PROGRESS = 1,       /* rg_test: not finished yet */
    RG_ERR_USAGE = -1,        /* a bad argument, or a call in the wrong state */
    RG_ERR_SYSTEM = -2,       /* the transport could not be set up (socket, device, EAL, QP) */
    RG_ERR_REFUSED = -3,      /* railgated refused the JOIN (job id in use, rank taken, table full...) */
    RG_ERR_RANK_FAILED = -4,  /* a rank of the job died, stopped or restarted: the error names it */
    RG_ERR_ABORTED = -5,      /* another rank aborted the job, or railgated's operator ended it (railctl job abort) */
    RG_ERR_RAIL_DOWN = -6,    /* a rail stopped answering or went down */
    RG_ERR_DAEMON_GONE = -7,  /* railgated stopped answering, or restarted */
    RG_ERR_EXPIRED = -8,      /* railgated ended the job: it did not assemble, or went idle */
    RG_ERR_TIMEOUT = -9       /* no progress for config.timeout_ms, or no JOIN answer in join_timeout_ms */
} rg_status;

/* In C++ an int underneath (the same size and registers as C's enum), so
   that the library can read, and refuse, any int a C caller passes. */
#ifdef __cplusplus
#define RG_DTYPE_BASE_ : int
#else
#define RG_DTYPE_BASE_
#endif
typedef enum rg_dtype RG_DTYPE_BASE_ { RG_FP32 = 0, RG_BF16 = 1, RG_FP16 = 2, RG_INT32 = 3 } rg_dtype;
#undef RG_DTYPE_BASE_

typedef struct rg_config {
    size_t struct_size;       /* sizeof(rg_config), set by rg_config_init */
    const char *server;       /* railgated's rail-0 IPv4 address (required) */
    uint16_t port;            /* railgated's UDP / rdma_cm port (default 47000) */
    const char *transport;    /* "udp" (default: kernel sockets), "dpdk" or "verbs" */
    /* dpdk: one "DEVARGS@IP" per rail, separated by ';', e.g.
     * "net_af_xdp0,iface=eth1@10.0.0.11;net_af_xdp1,iface=eth2@10.0.1.11" */
    const char *rails;
    uint32_t job;             /* the job id every rank uses */
    uint64_t token;           /* the job's secret, the same on every rank (rg_random_token) */
    uint32_t rank;            /* 0 .. world-1 */
    uint32_t world;           /* ranks in the job */
    rg_dtype dtype;           /* joined by rg_join (default RG_FP32) */
    uint64_t max_count;       /* largest allreduce in elements (0: the protocol's maximum) */
    uint32_t retries;         /* re-joins after a recoverable failure, the first join's too (0: fail at once) */
    uint32_t timeout_ms;      /* an allreduce with no progress this long fails (default 60000) */
    uint32_t join_timeout_ms; /* default 5000 */
    int32_t gid_index;        /* verbs: the GID index (-1, the default: RAILGATE_IB_GID_INDEX, else automatic) */
    uint8_t dscp;             /* udp/dpdk: the traffic class (DSCP) of the job's datagrams */
    /* udp/dpdk: RG_CC_DELAY makes each rail's window of chunks in flight
     * follow the measured round trip, railgated's queue depth and ECN marks
     * (the datagrams are then ECN-capable); RG_CC_QUEUE follows railgated's
     * queue depth, ECN marks and timeouts in a row only (not the round trip
     * nor a single loss: for hosts whose cores the job shares; the
     * default); RG_CC_OFF keeps the slot pool as the window. */
    uint8_t congestion_control;
    /* Liveness: a rail from which nothing (no result, no answer to the PINGs
     * sent after an eighth of this) came for this long is down, and every
     * rail that silent means railgated is gone: the allreduce fails with
     * RG_ERR_RAIL_DOWN or RG_ERR_DAEMON_GONE (default 1000; 0: the default).
     * Raise it where chunks take long to cross (slow or emulated fabrics). */
    uint32_t peer_timeout_ms;
    /* Told each failure the communicator recovers from (or tries to) as it
     * happens, with config.retries: what failed and what it does, then how
     * that went, one line each, e.g. "job 7 (fp32): operation 12: railgated
     * stopped answering on every rail for 1000 ms ...; asking railgated again
     * for the job as it was", then "job 7 (fp32): railgated answered:
     * operation 12 went on where it stood" (a re-join: "...; re-joining
     * (retry 1 of 3)"; the end of the tries: "giving up: ..."). A verbs
     * connect attempt that got no answer is told too, whatever
     * config.retries: "verbs connect to 198.18.0.1:47000: no answer within
     * 1000 ms; connecting again (attempt 2 of 3, 2000 ms)". Called with
     * on_retry_ctx and the rank, on the thread that runs the allreduce (the
     * communicator's progress thread, or a blocking caller's; rg_create's
     * caller for its first connect); the line
     * lives until it returns. It must not call the communicator. NULL (the
     * default): nothing is told; the counters (rg_get_stats) count. */
    void (*on_retry)(void *ctx, uint32_t rank, const char *line);
    void *on_retry_ctx;
    /* verbs: how long each rail's connect (rdma_cm: address, route and the
     * CM handshake) may take in all, in attempts of 1 s, then 2, 4 ... s, the
     * last what is left; an attempt that gets no answer is dropped for a new
     * one (told through on_retry), a refusal fails at once (default 5000; 0:
     * the default; at most 3600000). Raise it where the fabric loses packets
     * while jobs start. A caller built against a railgate.h without it (a
     * smaller struct_size) gets the default. */
    uint32_t connect_timeout_ms;
} rg_config;

enum { RG_CC_OFF = 0, RG_CC_DELAY = 1, RG_CC_QUEUE = 2 };

/* Fills *c with the defaults (and struct_size). */
void rg_config_init(rg_config *c);

/* "0.1.0"; the numbers through the pointers that are not NULL. */
const char *rg_version(int *major, int *minor, int *patch);

/* A random, never zero, 64-bit job token from the kernel's random source. */
uint64_t rg_random_token(void);

/* The status's name ("RG_ERR_RANK_FAILED"). */
const char *rg_status_name(rg_status s);

/* Makes a communicator and its transport (no traffic to railgated yet).
 * On failure *out is NULL and rg_last_error(NULL) says why. */
rg_status rg_create(const rg_config *c, rg_comm **out);

/* Joins the job (config.dtype's): returns once every rank has joined. */
rg_status rg_join(rg_comm *comm);

/* Leaves the job (after the queued allreduces finish). */
rg_status rg_leave(rg_comm *comm);

/* Tells railgated to end the job: the other ranks' allreduces fail with
 * RG_ERR_ABORTED and `why`. Queued allreduces of this rank fail too. */
rg_status rg_abort(rg_comm *comm, const char *why);

/* Finishes every allreduce queued on comm, leaves (if joined) and frees.
 * Its requests stay the caller's: rg_test, rg_wait, rg_request_error and
 * rg_request_free work on them after it (their status is final). Do not
 * call it while another thread is inside a call on comm. comm may be NULL. */
void rg_destroy(rg_comm *comm);

/* The last error of this communicator, or with NULL of this thread's last
 * rg_create; "" when there was none. The string is the calling thread's
 * copy, valid until its next rg_last_error. */
const char *rg_last_error(const rg_comm *comm);

/* Sums `count` elements of `dtype` from every rank into recv. send == recv
 * or send == NULL: in place. Blocks until done. */
rg_status rg_allreduce(rg_comm *comm, const void *send, void *recv, size_t count, rg_dtype dtype);

/* The same, asynchronous: queues the allreduce and returns a request. The
 * buffers must stay untouched until it finishes. A queued one is failed at
 * once (request made, status final) when an earlier one failed. */
rg_status rg_allreduce_start(rg_comm *comm, const void *send, void *recv, size_t count, rg_dtype dtype,
                             rg_request **req);

/* Compressed allreduce of a float buffer, in place: each element divided by
 * `divisor` (in float, e.g. the world size to average), rounded to `wire`
 * (RG_BF16 or RG_FP16, nearest even; RG_FP32: not rounded), summed as
 * `wire` by railgated, and written back as float. The division and the
 * conversions run on the communicator's thread (an asynchronous call
 * returns at once), vectorised; `wire`'s job is the one used. */
rg_status rg_allreduce_compressed(rg_comm *comm, float *buf, size_t count, rg_dtype wire, float divisor);
rg_status rg_allreduce_compressed_start(rg_comm *comm, float *buf, size_t count, rg_dtype wire, float divisor,
                                        rg_request **req);

/* RG_IN_PROGRESS, or the request's final status. */
rg_status rg_test(rg_request *req);

/* Blocks until the request finishes; its final status. */
rg_status rg_wait(rg_request *req);

/* Why the request failed ("" when it did not, or has not finished). Valid
 * until rg_request_free. */
const char *rg_request_error(const rg_request *req);

/* Frees a request; one still running is left to finish on its own, and
 * reads its send buffer and writes its recv buffer until it has: keep them
 * until then (a later allreduce on comm returning, or rg_destroy, says it
 * has: a communicator's allreduces end in order). */
void rg_request_free(rg_request *req);

/* Counters since rg_create, as of the last finished allreduce, summed over
 * the communicator's jobs (one per dtype used) and rails. Set struct_size
 * first (RG_STATS_INIT does): the library fills the fields that fit in it
 * and sets struct_size to what it filled, so that a program and a library
 * built from different versions of this header agree. Fields are only ever
 * added at the end.
 *
 *     rg_stats s = RG_STATS_INIT;
 *     if (rg_get_stats(comm, &s) == RG_OK) printf("%llu retransmits\n", (unsigned long long)s.retransmits);
 *
 * (librailgate 0.1's rg_stats had no struct_size; programs built against it
 * keep its rg_get_stats, symbol version RAILGATE_0.) */
typedef struct rg_stats {
    size_t struct_size;
    uint64_t allreduces;           /* finished, RG_OK */
    uint64_t bytes;                /* their payload, count x the dtype's size */
    uint64_t retransmits;          /* chunks sent again, for any reason */
    uint64_t recoveries;           /* joins and allreduces run again after a recovered failure (config.retries) */
    /* Since 0.2: */
    uint64_t timeout_retransmits;  /* of retransmits: after a timeout ran out (a silent rail's probes too) */
    uint64_t tail_probes;          /* of retransmits: an allreduce's last chunk, sent again as a probe */
    uint64_t spurious_retransmits; /* of retransmits: not lost (railgated answered both copies): reordering */
    uint64_t window_decreases;     /* congestion control's cuts of a rail's window (loss, delay, ECN) */
    uint64_t ecn_marks;            /* results that came, or whose chunks came, marked ECN CE */
} rg_stats;
#define RG_STATS_INIT { sizeof(rg_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0 }
/* RG_OK, or RG_ERR_USAGE when comm or out is NULL or out->struct_size is
 * smaller than 0.2's first five fields. */
rg_status rg_get_stats(const rg_comm *comm, rg_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* RAILGATE_H */
