/* runtime/data — a rank's shard of a set read in place from its file, and
 * the order an epoch reads it in.
 *
 * The shard: rank r of W takes, from every global batch, the slice
 * rt_rank_slice gives it; its shard is the contiguous run of samples that
 * those slices add up to over an epoch (its slice of a full batch times
 * the full batches, plus its slice of the last, short one). So the shards
 * cover the set exactly once: nothing is padded and nothing dropped, every
 * rank has the same number of steps, and each step's slices are the sizes
 * an unsharded loader gives; only which samples make up a global batch
 * differs. Every rank computes every boundary from (n, batch, world).
 *
 * The order: a block shuffle. The shard is cut into blocks of about
 * RT_SHARD_BLOCK_BYTES of the file, the blocks are permuted, and the samples
 * are then shuffled within windows of RT_SHARD_WINDOW_BLOCKS consecutive
 * blocks of that order: an epoch's order is not the file's, a batch draws
 * from RT_SHARD_WINDOW_BLOCKS places of the shard, and a window's reads stay
 * within a few MiB of the file (the page cache's and read-ahead's unit)
 * rather than one random row per page. */
#include "data_int.h"

/* Keeps a shard's draws apart from the unsharded loader's (seed, epoch). */
#define SHARD_STREAM 0x5ba4d000000000ull

void rt_rank_slice(size_t size, int rank, int world, size_t *start, size_t *len)
{
    size_t w = (size_t)world, r = (size_t)rank;
    size_t base = size / w, extra = size % w;
    *start = r * base + (r < extra ? r : extra);
    *len = base + (r < extra ? 1 : 0);
}

void rt_shard_of(size_t n, size_t batch, int rank, int world, size_t *lo, size_t *len)
{
    size_t full = n / batch, rest = n % batch;
    size_t s_full, l_full, s_rest, l_rest;
    rt_rank_slice(batch, rank, world, &s_full, &l_full);
    rt_rank_slice(rest, rank, world, &s_rest, &l_rest);
    *lo = full * s_full + s_rest;
    *len = full * l_full + l_rest;
}

size_t rt_shard_block_rows(size_t row_bytes)
{
    size_t rows = row_bytes ? RT_SHARD_BLOCK_BYTES / row_bytes : 1;
    return rows ? rows : 1;
}

static void shuffle(uint32_t *a, size_t n, rt_rng *r)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rt_rng_below(r, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

size_t rt_shard_blocks(size_t len, size_t block_rows)
{
    return (len + block_rows - 1) / block_rows;
}

void rt_shard_order(uint32_t *perm, uint32_t *order, size_t lo, size_t len,
                    size_t block_rows, bool shuffled, uint64_t seed, int rank, int epoch)
{
    if (!shuffled) {
        for (size_t i = 0; i < len; i++)
            perm[i] = (uint32_t)(lo + i);
        return;
    }
    size_t blocks = rt_shard_blocks(len, block_rows);
    for (size_t b = 0; b < blocks; b++)
        order[b] = (uint32_t)b;
    rt_rng r;
    rt_rng_seed(&r, seed, SHARD_STREAM ^ ((uint64_t)rank << 32) ^ (uint64_t)epoch);
    shuffle(order, blocks, &r);
    /* A window is RT_SHARD_WINDOW_BLOCKS whole blocks of that order (the
     * short last block of the shard may fall into any). */
    size_t at = 0, window_start = 0;
    for (size_t b = 0; b < blocks; b++) {
        size_t first = (size_t)order[b] * block_rows;
        size_t end = first + block_rows < len ? first + block_rows : len;
        for (size_t i = first; i < end; i++)
            perm[at++] = (uint32_t)(lo + i);
        if ((b + 1) % RT_SHARD_WINDOW_BLOCKS == 0 || b + 1 == blocks) {
            shuffle(perm + window_start, at - window_start, &r);
            window_start = at;
        }
    }
}
