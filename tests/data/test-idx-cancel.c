/* tests/data — a load polled for cancellation: it reads the file when
 * nobody cancels, and gives up with FERRY_ECANCELED, naming the file and
 * leaving nothing, when the poll says so partway. */
#include <stdlib.h>
#include <string.h>

#include "tdata.h"

typedef struct poll_count {
    int calls, cancel_at;
} poll_count;

static bool poll_cancel(void *arg)
{
    poll_count *p = arg;
    return ++p->calls >= p->cancel_at;
}

/* A gzip'd IDX file of 3 x 2048 x 2048 bytes: several pieces of a polled
 * read. */
static const char *write_big_gz(void)
{
    uint32_t dims[3] = {3, 2048, 2048};
    size_t len = (size_t)3 * 2048 * 2048, flen;
    uint8_t *data = malloc(len);
    cr_assert(data);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 24);
    uint8_t *file = td_idx_bytes(0x08, 3, dims, data, len, &flen);
    free(data);
    const char *path = td_path("big.idx.gz");
    td_write_gz(path, file, flen);
    free(file);
    return path;
}

TD_TEST(idx_cancel, a_polled_read_that_is_never_cancelled_reads_it_all)
{
    const char *path = write_big_gz();
    poll_count p = {.cancel_at = 1 << 30};
    rt_data_cancel c = {poll_cancel, &p};
    rt_idx idx;
    char err[256] = "";
    cr_assert_eq(rt_idx_read_polled(path, &c, &idx, err, sizeof err), 0, "%s", err);
    cr_expect_eq(idx.len, (size_t)3 * 2048 * 2048);
    cr_expect_gt(p.calls, 1, "the read polled %d times", p.calls);
    rt_idx_free(&idx);
}

TD_TEST(idx_cancel, a_read_cancelled_partway_gives_up_naming_the_file)
{
    const char *path = write_big_gz();
    poll_count p = {.cancel_at = 2};
    rt_data_cancel c = {poll_cancel, &p};
    rt_idx idx;
    char err[256] = "";
    cr_assert_eq(rt_idx_read_polled(path, &c, &idx, err, sizeof err), FERRY_ECANCELED);
    cr_expect_null(idx.data, "a cancelled read leaves no data");
    cr_expect(strstr(err, path) && strstr(err, "cancelled"), "%s", err);
    cr_expect_eq(p.calls, 2);
}
