/* A process-wide pool of large, already-touched buffers.
 *
 * A 64 MiB message received into fresh malloc memory spends most of its time
 * in page faults (STACK-NOTES: 24% of TCP speed, against ~90% with a reused
 * buffer). Received payloads, lz4 scratch and the copies of payloads sent
 * without being lent come from here and go back here (a sent copy from the
 * destroy function of gRPC's slice, on whichever thread drops it last), so
 * steady-state traffic touches no new pages. Small buffers go straight to
 * malloc, which already recycles them. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_int.h"

#define ALIGN           64
#define HDR             64                  /* keeps the payload 64-byte aligned */
#define POOL_MIN        ((size_t)64 << 10)  /* below this: plain malloc */
#define POOL_CAP        ((size_t)768 << 20) /* most bytes kept idle */
#define POOL_MAX_BLOCKS 32

typedef struct blk {
    size_t cap; /* bytes usable after the header */
    struct blk *next;
} blk;

_Static_assert(sizeof(blk) <= HDR, "header must fit");

static struct {
    uv_once_t once;
    uv_mutex_t lock;
    blk *free;
    size_t bytes, blocks;
} pool = {.once = UV_ONCE_INIT};

static void pool_init(void)
{
    uv_mutex_init(&pool.lock);
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

void *rpc_buf_alloc(size_t len)
{
    size_t cap =
        len < POOL_MIN ? round_up(len ? len : 1, ALIGN) : round_up(len, POOL_MIN);
    if (len > SIZE_MAX - 2 * POOL_MIN)
        return NULL;
    if (cap >= POOL_MIN) {
        uv_once(&pool.once, pool_init);
        uv_mutex_lock(&pool.lock);
        /* First fit that wastes at most a quarter: a recycled block is worth
         * more than a tight one. */
        for (blk **pp = &pool.free; *pp; pp = &(*pp)->next) {
            blk *b = *pp;
            if (b->cap >= cap && b->cap - cap <= cap / 4) {
                *pp = b->next;
                pool.bytes -= b->cap;
                pool.blocks--;
                uv_mutex_unlock(&pool.lock);
                return (char *)b + HDR;
            }
        }
        uv_mutex_unlock(&pool.lock);
    }
    blk *b = aligned_alloc(ALIGN, HDR + cap);
    if (!b)
        return NULL;
    b->cap = cap;
    b->next = NULL;
    return (char *)b + HDR;
}

void rpc_buf_free(void *buf)
{
    if (!buf)
        return;
    blk *b = (blk *)((char *)buf - HDR);
    if (b->cap >= POOL_MIN) {
        uv_once(&pool.once, pool_init);
        uv_mutex_lock(&pool.lock);
        if (pool.bytes + b->cap <= POOL_CAP && pool.blocks < POOL_MAX_BLOCKS) {
            b->next = pool.free;
            pool.free = b;
            pool.bytes += b->cap;
            pool.blocks++;
            b = NULL;
        }
        uv_mutex_unlock(&pool.lock);
    }
    free(b);
}

void rpc_buf_trim(void)
{
    uv_once(&pool.once, pool_init);
    uv_mutex_lock(&pool.lock);
    blk *b = pool.free;
    pool.free = NULL;
    pool.bytes = pool.blocks = 0;
    uv_mutex_unlock(&pool.lock);
    while (b) {
        blk *next = b->next;
        free(b);
        b = next;
    }
}

void rpc_tune_malloc(void)
{
    /* Keep freed memory instead of returning it at once, and serve blocks up
     * to 32 MiB from the heap rather than fresh mappings. */
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
}
