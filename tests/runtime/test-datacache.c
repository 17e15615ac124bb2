/* tests/runtime — PutData and the data cache, through real calls: a file
 * arrives in chunks and is kept under its digest and name, a question
 * about a file the worker holds says so, chunks out of order and bytes
 * whose digest is not the one they were sent as are refused (nothing half
 * kept), a file over the cap is refused, and the least recently used go
 * first once the cap is passed, as many as the cap needs. */
#include "rth.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(rt_data, .init = rth_setup_dir, .fini = rth_teardown, .timeout = 60);

#define MIB (1u << 20)

static void start(uint64_t cap)
{
    rt_worker_opts o = {.data_cache_bytes = cap};
    rth_start_worker(&o);
}

/* PutData of bytes off..off+len of `data` (NULL: a question). */
static int put(const char *sha, const char *name, const void *data, uint64_t size,
               uint64_t off, size_t len, proto_put_data_reply **reply, char *err,
               size_t errlen)
{
    proto_put_data_req req = {
        .sha256 = (char *)sha, .name = (char *)name, .size = size, .offset = off};
    proto_bytes head;
    cr_assert(proto_put_data_req_pack(&req, &head) == 0);
    rpc_call call;
    int rc = rth_call_head(R.ch, &call, PROTO_METHOD_PUT_DATA, &head,
                           data ? (const char *)data + off : NULL, data ? len : 0);
    if (rc == 0 && reply)
        cr_assert(proto_put_data_reply_unpack(call.reply.head, call.reply.head_len,
                                              reply) == 0);
    if (rc && err)
        snprintf(err, errlen, "%s", call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    return rc;
}

static char *bytes_of(size_t len, unsigned seed, char sha[RT_SHA256_HEX])
{
    char *b = malloc(len);
    cr_assert(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (char)(i * 31 + seed);
    rt_sha256_hex(b, len, sha);
    return b;
}

static bool kept(const char *sha, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/data/%s/%s", R.state, sha, name);
    return access(path, R_OK) == 0;
}

RTH_TEST(rt_data, a_file_arrives_in_chunks_and_is_kept_by_digest_and_name)
{
    start(0);
    char sha[RT_SHA256_HEX], err[512] = "";
    char *b = bytes_of(300000, 1, sha);
    proto_put_data_reply *r = NULL;
    cr_assert(put(sha, "x.npy", NULL, 300000, 0, 0, &r, err, sizeof err) == 0, "%s", err);
    cr_expect(!r->have && r->received == 0);
    proto_free(r);
    cr_assert(put(sha, "x.npy", b, 300000, 0, 200000, &r, err, sizeof err) == 0, "%s",
              err);
    cr_expect(!r->have && r->received == 200000, "%d %llu", r->have,
              (unsigned long long)r->received);
    proto_free(r);
    cr_assert(put(sha, "x.npy", b, 300000, 200000, 100000, &r, err, sizeof err) == 0,
              "%s", err);
    cr_expect(r->have && r->received == 300000);
    proto_free(r);
    cr_expect(kept(sha, "x.npy"));
    cr_assert(put(sha, "x.npy", NULL, 300000, 0, 0, &r, err, sizeof err) == 0, "%s", err);
    cr_expect(r->have, "a question about a file it holds says so");
    proto_free(r);
    /* The same bytes under another name: kept under both, nothing sent. */
    cr_assert(put(sha, "y.npy", NULL, 300000, 0, 0, &r, err, sizeof err) == 0, "%s", err);
    cr_expect(r->have && kept(sha, "y.npy"));
    proto_free(r);
    free(b);
}

RTH_TEST(rt_data, a_chunk_out_of_order_is_refused)
{
    start(0);
    char sha[RT_SHA256_HEX], err[512] = "";
    char *b = bytes_of(1000, 2, sha);
    cr_assert(put(sha, "a.csv", b, 1000, 0, 400, NULL, err, sizeof err) == 0, "%s", err);
    int rc = put(sha, "a.csv", b, 1000, 600, 400, NULL, err, sizeof err);
    cr_expect_eq(rc, FERRY_EINVAL);
    cr_expect(strstr(err, "chunk at 600 of a.csv, but 400 bytes are in"), "%s", err);
    free(b);
}

RTH_TEST(rt_data, bytes_whose_digest_differs_are_refused_and_not_kept)
{
    start(0);
    char sha[RT_SHA256_HEX], err[512] = "";
    char *b = bytes_of(5000, 3, sha);
    b[4000] ^= 1; /* a bit flipped on the way */
    int rc = put(sha, "t.npz", b, 5000, 0, 5000, NULL, err, sizeof err);
    cr_expect_eq(rc, FERRY_EINVAL);
    cr_expect(strstr(err, "t.npz arrived with sha256"), "%s", err);
    char part[1024];
    snprintf(part, sizeof part, "%s/data/%s.part", R.state, sha);
    cr_expect(access(part, F_OK) != 0 && !kept(sha, "t.npz"), "half a file was kept");
    free(b);
}

RTH_TEST(rt_data, a_file_over_the_cap_and_a_name_with_a_slash_are_refused)
{
    start(MIB);
    char sha[RT_SHA256_HEX], err[512] = "";
    char *b = bytes_of(10, 4, sha);
    int rc = put(sha, "big.npy", NULL, 2 * MIB, 0, 0, NULL, err, sizeof err);
    cr_expect_eq(rc, FERRY_EINVAL);
    cr_expect(strstr(err, "over this worker's data cache of 1048576"), "%s", err);
    rc = put(sha, "../x", b, 10, 0, 10, NULL, err, sizeof err);
    cr_expect_eq(rc, FERRY_EINVAL);
    cr_expect(strstr(err, "plain file name"), "%s", err);
    free(b);
}

RTH_TEST(rt_data, past_the_cap_the_least_recently_used_go_first)
{
    start(MIB);
    char sha[3][RT_SHA256_HEX], err[512] = "";
    size_t len = 400000;
    for (int i = 0; i < 3; i++) {
        char *b = bytes_of(len, (unsigned)(10 + i), sha[i]);
        cr_assert(put(sha[i], "f.bin", b, len, 0, len, NULL, err, sizeof err) == 0, "%s",
                  err);
        free(b);
        if (i == 0) {
            /* Used again before the second arrives: the second is older. */
            usleep(20000);
        }
        if (i == 1) {
            usleep(20000);
            proto_put_data_reply *r = NULL;
            cr_assert(put(sha[0], "f.bin", NULL, len, 0, 0, &r, err, sizeof err) == 0);
            cr_expect(r->have);
            proto_free(r);
            usleep(20000);
        }
    }
    cr_expect(kept(sha[0], "f.bin"), "the file used last but one was evicted");
    cr_expect(!kept(sha[1], "f.bin"), "the least recently used file was kept");
    cr_expect(kept(sha[2], "f.bin"), "the file just put was evicted");
}

RTH_TEST(rt_data, one_file_past_the_cap_evicts_several_least_recently_used_first)
{
    start(MIB);
    enum { N = 4 };
    /* Three small files, the first used again last; then one large enough
     * that two of the others must go for it, but not the one used. */
    static const size_t len[N] = {250000, 250000, 250000, 600000};
    char sha[N][RT_SHA256_HEX], err[512] = "";
    for (int i = 0; i < N; i++) {
        if (i == N - 1) {
            proto_put_data_reply *r = NULL;
            cr_assert(put(sha[0], "f.bin", NULL, len[0], 0, 0, &r, err, sizeof err) == 0);
            cr_expect(r->have);
            proto_free(r);
            usleep(20000);
        }
        char *b = bytes_of(len[i], (unsigned)(20 + i), sha[i]);
        cr_assert(put(sha[i], "f.bin", b, len[i], 0, len[i], NULL, err, sizeof err) == 0,
                  "%s", err);
        free(b);
        usleep(20000);
    }
    cr_expect(kept(sha[0], "f.bin"), "the file used most recently but one was evicted");
    cr_expect(!kept(sha[1], "f.bin"), "the least recently used file was kept");
    cr_expect(!kept(sha[2], "f.bin"), "the next least recently used file was kept");
    cr_expect(kept(sha[3], "f.bin"), "the file just put was evicted");
}
