/* A C program built only from the installed railgate.h and librailgate
 * (pkg-config --cflags --libs railgate), the way a framework would use it.
 *
 *   rg_abi_check usage                        argument checks, no server
 *   rg_abi_check run SERVER RANK WORLD JOB    every dtype, blocking and
 *       asynchronous, in place and out of place; every element checked
 *       against the rank-order sum
 *   rg_abi_check die SERVER RANK WORLD JOB N  N allreduces, then rank
 *       WORLD-1 exits without leaving and the others must fail naming it
 *   rg_abi_check refused SERVER RANK WORLD JOB  the join must be refused
 *   rg_abi_check pause SERVER RANK WORLD JOB N  N allreduces 30 ms apart,
 *       each checked, with retries and a 300 ms peer timeout, printing
 *       what config.on_retry is told ("on_retry: rank R: LINE"): railgated
 *       paused past the peer timeout meanwhile is waited out
 * The job's token comes from $RAILGATE_TOKEN. Exit 0 on success.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep under -std=c11 */
#include <railgate.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COUNT 100003 /* not a multiple of any chunk */

static int fail(const char *what, rg_comm *comm) {
    fprintf(stderr, "rg_abi_check: %s: %s\n", what, rg_last_error(comm));
    return 1;
}

/* Element i of rank r's input: exact in every dtype (small integers and
 * quarters), so the sum is known; fp32 also gets an inexact part that makes
 * the order of the sum visible. */
static float value(unsigned r, unsigned i) { return (float)((i * 7 + r * 3) % 29) * 0.25f; }

static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for these values */
}
static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* Half precision of a small multiple of 0.25 (exact). */
static uint16_t f32_to_f16(float f) {
    if (f == 0.0f) return 0;
    int e = 0;
    float m = f;
    while (m >= 2.0f) { m /= 2.0f; ++e; }
    while (m < 1.0f) { m *= 2.0f; --e; }
    return (uint16_t)(((e + 15) << 10) | (uint16_t)((m - 1.0f) * 1024.0f));
}
static float f16_to_f32(uint16_t h) {
    int e = (h >> 10) & 31;
    float m = 1.0f + (float)(h & 1023) / 1024.0f;
    if (e == 0) return 0.0f;
    for (; e > 15; --e) m *= 2.0f;
    for (; e < 15; ++e) m /= 2.0f;
    return m;
}

static int check_usage(void) {
    rg_config c;
    rg_comm *comm = (rg_comm *)1;
    int major = -1;
    const char *v = rg_version(&major, NULL, NULL);
    if (!v || major != RAILGATE_VERSION_MAJOR) return fail("rg_version", NULL);
    rg_config_init(&c);
    c.server = "not-an-address";
    c.token = 1;
    c.world = 1;
    if (rg_create(&c, &comm) != RG_ERR_USAGE || comm || !strstr(rg_last_error(NULL), "not an IPv4"))
        return fail("a bad server must be refused", NULL);
    c.server = "127.0.0.1";
    c.token = 0;
    if (rg_create(&c, &comm) != RG_ERR_USAGE || !strstr(rg_last_error(NULL), "rg_random_token"))
        return fail("token 0 must be refused", NULL);
    c.token = rg_random_token();
    c.rank = 3;
    c.world = 2;
    if (rg_create(&c, &comm) != RG_ERR_USAGE || !strstr(rg_last_error(NULL), "rank 3"))
        return fail("rank >= world must be refused", NULL);
    c.rank = 0;
    c.transport = "carrier-pigeon";
    if (rg_create(&c, &comm) != RG_ERR_USAGE) return fail("an unknown transport must be refused", NULL);
    c.transport = NULL;
    c.max_count = 1000;
    if (rg_create(&c, &comm) != RG_OK) return fail("rg_create", NULL);
    float x[4] = {0};
    if (rg_allreduce(comm, x, x, 4, (rg_dtype)9) != RG_ERR_USAGE || !strstr(rg_last_error(comm), "dtype"))
        return fail("a bad dtype must be refused", comm);
    if (rg_allreduce(comm, x, x, 1001, RG_FP32) != RG_ERR_USAGE || !strstr(rg_last_error(comm), "max_count"))
        return fail("a count above max_count must be refused", comm);
    if (rg_allreduce(comm, x, x + 1, 2, RG_FP32) != RG_ERR_USAGE || !strstr(rg_last_error(comm), "overlap"))
        return fail("overlapping buffers must be refused", comm);
    if (strcmp(rg_status_name(RG_ERR_RANK_FAILED), "RG_ERR_RANK_FAILED") != 0) return fail("rg_status_name", NULL);
    rg_destroy(comm);
    rg_destroy(NULL);
    printf("ok: argument checks, version %s\n", v);
    return 0;
}

/* The job's config: its token from $RAILGATE_TOKEN, COUNT elements at most. */
static void config_for(rg_config *c, const char *server, unsigned rank, unsigned world, unsigned job) {
    const char *tok = getenv("RAILGATE_TOKEN");
    rg_config_init(c);
    c->server = server;
    c->rank = rank;
    c->world = world;
    c->job = job;
    c->token = tok ? strtoull(tok, NULL, 10) : 0;
    c->max_count = COUNT;
    c->timeout_ms = 20000;
}

static rg_comm *make(const char *server, unsigned rank, unsigned world, unsigned job, rg_status *st) {
    rg_config c;
    rg_comm *comm = NULL;
    config_for(&c, server, rank, world, job);
    *st = rg_create(&c, &comm);
    if (*st != RG_OK) return NULL;
    *st = rg_join(comm);
    return comm;
}

static int run(const char *server, unsigned rank, unsigned world, unsigned job) {
    rg_status st;
    rg_comm *comm = make(server, rank, world, job, &st);
    if (!comm || st != RG_OK) return fail("create and join", comm);
    float *f = malloc(COUNT * sizeof *f), *fo = malloc(COUNT * sizeof *fo);
    uint16_t *b = malloc(COUNT * 2), *bo = malloc(COUNT * 2), *h = malloc(COUNT * 2);
    int32_t *n = malloc(COUNT * sizeof *n);
    unsigned i, r;
    if (!f || !fo || !b || !bo || !h || !n) return fail("malloc", NULL);
    for (i = 0; i < COUNT; ++i) {
        f[i] = value(rank, i) + (float)rank / 3.0f;
        b[i] = f32_to_bf16(value(rank, i));
        h[i] = f32_to_f16(value(rank, i));
        n[i] = (int32_t)(i * 2654435761u) ^ (int32_t)rank;
    }
    /* Blocking, in place (fp32). */
    if (rg_allreduce(comm, f, f, COUNT, RG_FP32) != RG_OK) return fail("fp32 allreduce", comm);
    /* Asynchronous, out of place, three at once (bf16, fp16 in place, int32). */
    rg_request *q[3];
    if (rg_allreduce_start(comm, b, bo, COUNT, RG_BF16, &q[0]) != RG_OK ||
        rg_allreduce_start(comm, h, h, COUNT, RG_FP16, &q[1]) != RG_OK ||
        rg_allreduce_start(comm, n, n, COUNT, RG_INT32, &q[2]) != RG_OK)
        return fail("allreduce_start", comm);
    if (rg_test(q[2]) == RG_OK && rg_test(q[0]) == RG_IN_PROGRESS)
        return fail("requests must finish in order", comm);
    for (i = 0; i < 3; ++i) {
        if (rg_wait(q[i]) != RG_OK) {
            fprintf(stderr, "rg_abi_check: request %u: %s\n", i, rg_request_error(q[i]));
            return 1;
        }
        rg_request_free(q[i]);
    }
    for (i = 0; i < COUNT; ++i) {
        float e = 0.0f, eb = 0.0f;
        uint32_t sum = 0; /* int32 sums wrap, as two's complement: summed unsigned here (no UB) */
        int32_t en;
        for (r = 0; r < world; ++r) {
            e += value(r, i) + (float)r / 3.0f;
            eb += value(r, i);
            sum += (uint32_t)((int32_t)(i * 2654435761u) ^ (int32_t)r);
        }
        en = (int32_t)sum;
        if (memcmp(&f[i], &e, 4) != 0) {
            fprintf(stderr, "rg_abi_check: fp32 element %u: %.9g, rank-order sum %.9g\n", i, f[i], e);
            return 1;
        }
        if (bf16_to_f32(bo[i]) != eb || f16_to_f32(h[i]) != eb || n[i] != en) {
            fprintf(stderr, "rg_abi_check: element %u: bf16 %g fp16 %g int32 %d, expected %g / %d\n", i,
                    bf16_to_f32(bo[i]), f16_to_f32(h[i]), n[i], eb, en);
            return 1;
        }
        if (b[i] != f32_to_bf16(value(rank, i))) return fail("out of place changed its input", NULL);
    }
    /* Compressed (float in, bf16 and fp16 on the wire, averaged): each rank
     * sends world x its values, divided by world on the way (exact). */
    for (i = 0; i < COUNT; ++i) f[i] = value(rank, i) * (float)world;
    if (rg_allreduce_compressed(comm, f, COUNT, RG_BF16, (float)world) != RG_OK) return fail("compressed bf16", comm);
    for (i = 0; i < COUNT; ++i) fo[i] = value(rank, i) * (float)world;
    if (rg_allreduce_compressed_start(comm, fo, COUNT, RG_FP16, (float)world, &q[0]) != RG_OK || rg_wait(q[0]) != RG_OK)
        return fail("compressed fp16", comm);
    rg_request_free(q[0]);
    for (i = 0; i < COUNT; ++i) {
        float e = 0.0f;
        for (r = 0; r < world; ++r) e += value(r, i);
        if (f[i] != e || fo[i] != e) {
            fprintf(stderr, "rg_abi_check: compressed element %u: bf16 %g fp16 %g, expected %g\n", i, f[i], fo[i], e);
            return 1;
        }
    }
    if (rg_allreduce_compressed(comm, f, COUNT, RG_INT32, 1.0f) != RG_ERR_USAGE) return fail("compressed int32", comm);
    rg_stats s = RG_STATS_INIT;
    if (rg_get_stats(comm, &s) != RG_OK || s.struct_size != sizeof s || s.allreduces != 6 ||
        s.spurious_retransmits > s.retransmits)
        return fail("rg_get_stats", comm);
    rg_destroy(comm);
    free(f); free(fo); free(b); free(bo); free(h); free(n);
    printf("ok: rank %u of %u: fp32 (blocking, in place), bf16 (async, out of place), fp16, int32: "
           "compressed bf16/fp16; %u elements bit-exact; %llu retransmits\n",
           rank, world, COUNT, (unsigned long long)s.retransmits);
    return 0;
}

static int die(const char *server, unsigned rank, unsigned world, unsigned job, unsigned ops) {
    rg_status st;
    rg_comm *comm = make(server, rank, world, job, &st);
    if (!comm || st != RG_OK) return fail("create and join", comm);
    float *f = calloc(COUNT, sizeof *f);
    unsigned k;
    for (k = 0;; ++k) {
        if (rank == world - 1 && k == ops) {
            printf("rank %u exits without leaving after %u allreduces\n", rank, k);
            fflush(stdout);
            _Exit(0);
        }
        st = rg_allreduce(comm, f, f, COUNT, RG_FP32);
        if (st != RG_OK) break;
    }
    if (st != RG_ERR_RANK_FAILED) {
        fprintf(stderr, "rg_abi_check: expected RG_ERR_RANK_FAILED, got %s: %s\n", rg_status_name(st),
                rg_last_error(comm));
        return 1;
    }
    char want[32];
    snprintf(want, sizeof want, "rank %u", world - 1);
    if (!strstr(rg_last_error(comm), want)) {
        fprintf(stderr, "rg_abi_check: the error does not name %s: %s\n", want, rg_last_error(comm));
        return 1;
    }
    /* The communicator stays failed: the next one says why at once. */
    if (rg_allreduce(comm, f, f, 4, RG_FP32) != RG_ERR_RANK_FAILED) return fail("a failed job must stay failed", comm);
    printf("ok: rank %u after %u allreduces: %s: %s\n", rank, k, rg_status_name(st), rg_last_error(comm));
    rg_destroy(comm);
    free(f);
    return 0;
}

static unsigned told; /* on_retry's lines */
static void on_retry(void *ctx, uint32_t rank, const char *line) {
    printf("on_retry: rank %u: %s\n", (unsigned)rank, line);
    fflush(stdout);
    ++*(unsigned *)ctx;
}

static int pause_ops(const char *server, unsigned rank, unsigned world, unsigned job, unsigned ops) {
    enum { n = 4099 };
    rg_config c;
    rg_comm *comm = NULL;
    config_for(&c, server, rank, world, job);
    c.max_count = n;
    c.retries = 3;
    c.peer_timeout_ms = 300;
    c.on_retry = on_retry;
    c.on_retry_ctx = &told;
    if (rg_create(&c, &comm) != RG_OK || rg_join(comm) != RG_OK) return fail("create and join", comm);
    printf("joined: rank %u\n", rank);
    fflush(stdout);
    float *f = malloc(n * sizeof *f);
    unsigned k, i, r;
    if (!f) return fail("malloc", NULL);
    for (k = 0; k < ops; ++k) {
        for (i = 0; i < n; ++i) f[i] = value(rank, i) + (float)k;
        if (rg_allreduce(comm, f, f, n, RG_FP32) != RG_OK) return fail("allreduce", comm);
        for (i = 0; i < n; ++i) {
            float e = 0.0f;
            for (r = 0; r < world; ++r) e += value(r, i) + (float)k;
            if (f[i] != e) {
                fprintf(stderr, "rg_abi_check: allreduce %u element %u: %g, expected %g\n", k, i, f[i], e);
                return 1;
            }
        }
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    rg_stats s = RG_STATS_INIT;
    if (rg_get_stats(comm, &s) != RG_OK) return fail("rg_get_stats", comm);
    rg_destroy(comm);
    free(f);
    printf("ok: rank %u: %u allreduces bit-exact, %u lines told, %llu recoveries\n", rank, ops, told,
           (unsigned long long)s.recoveries);
    return 0;
}

static int refused(const char *server, unsigned rank, unsigned world, unsigned job) {
    rg_status st;
    rg_comm *comm = make(server, rank, world, job, &st);
    if (!comm) return fail("create", NULL);
    if (st != RG_ERR_REFUSED) {
        fprintf(stderr, "rg_abi_check: expected RG_ERR_REFUSED, got %s: %s\n", rg_status_name(st), rg_last_error(comm));
        return 1;
    }
    printf("ok: refused: %s\n", rg_last_error(comm));
    rg_destroy(comm);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "usage") == 0) return check_usage();
    if (argc >= 6) {
        unsigned rank = (unsigned)atoi(argv[3]), world = (unsigned)atoi(argv[4]), job = (unsigned)atoi(argv[5]);
        if (strcmp(argv[1], "run") == 0) return run(argv[2], rank, world, job);
        if (strcmp(argv[1], "refused") == 0) return refused(argv[2], rank, world, job);
        if (strcmp(argv[1], "die") == 0 && argc >= 7) return die(argv[2], rank, world, job, (unsigned)atoi(argv[6]));
        if (strcmp(argv[1], "pause") == 0 && argc >= 7)
            return pause_ops(argv[2], rank, world, job, (unsigned)atoi(argv[6]));
    }
    fprintf(stderr, "usage: rg_abi_check usage | run|refused SERVER RANK WORLD JOB | die|pause SERVER RANK WORLD JOB N\n");
    return 2;
}
