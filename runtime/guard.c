/* Memory with an inaccessible page right after its end: a model that
 * writes past its workspace faults at that write, inside the callback
 * that made it, and the crash record (crash.c) names both the region and
 * the callback, instead of the run going on over someone else's memory.
 *
 * What it costs: one mmap and one page of address space (no memory) per
 * region, and nothing per write or per step, so it is always on, for the
 * cpu device (device memory on a GPU is the CUDA allocator's). The end of
 * the region sits on the page boundary when its size is a multiple of 64
 * bytes (16 floats, as ferry_arena_size rounds every piece); otherwise the
 * start keeps its 64-byte alignment and the few bytes between the end and
 * the boundary, fewer than 64, are not guarded. */
#include <sys/mman.h>
#include <unistd.h>

#include "runtime_int.h"

typedef struct guarded {
    void *map;
    size_t maplen;
} guarded;

void *rt_guarded_alloc(size_t bytes, const char *what)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = (bytes + 63) / 64 * 64;
    /* A header page in front holds where the mapping starts. */
    size_t need = (sizeof(guarded) + body + page - 1) / page * page;
    if (bytes == 0 || body < bytes || need > SIZE_MAX - page)
        return NULL;
    size_t maplen = need + page;
    char *map =
        mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    char *end = map + need;
    if (mprotect(end, page, PROT_NONE) != 0) {
        munmap(map, maplen);
        return NULL;
    }
    char *p = end - body;
    guarded *g = (guarded *)p - 1;
    *g = (guarded){map, maplen};
    rt_crash_guard(end, page, what, bytes);
    return p;
}

void rt_guarded_free(void *p)
{
    if (!p)
        return;
    guarded g = ((guarded *)p)[-1];
    rt_crash_unguard((char *)g.map + g.maplen - (size_t)sysconf(_SC_PAGESIZE));
    munmap(g.map, g.maplen);
}
