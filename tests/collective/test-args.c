/* tests/collective — argument checks of rt_comm_create and the names of the
 * compression modes. No collective runs: nothing is dialled. */
#include "tcoll.h"

#include <string.h>

TestSuite(comm_create, .init = co_setup, .fini = co_teardown, .timeout = 30);
TestSuite(compress_names, .timeout = 30);

static const char *const dead_peers[] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};

static rt_comm_opts opts(uint64_t session, int rank, int world)
{
    return (rt_comm_opts){.session = session,
                          .rank = rank,
                          .world = world,
                          .peers = dead_peers,
                          .secret = co_secret,
                          .timeout_ms = 1000};
}

/* Expects rt_comm_create to refuse `o` with `want`, saying why, and to
 * leave *out alone. */
static void refused(const rt_comm_opts *o, int want, const char *what)
{
    rt_comm *c = NULL;
    char err[CO_ERRLEN] = "";
    int rc = rt_comm_create(R.r[0].hub, o, &c, err, sizeof err);
    if (rc == 0)
        R.r[1].comm = c; /* released by the fixture */
    cr_assert(rc == want, "%s: got %s, want %s", what, ferry_err_name(rc),
              ferry_err_name(want));
    cr_assert(c == NULL, "%s: *out was set on failure", what);
    cr_assert(err[0], "%s: no error text", what);
}

static void make_hub(void)
{
    co_make_hub(0);
}

CO_TEST(comm_create, refuses_a_rank_at_or_past_the_world)
{
    make_hub();
    rt_comm_opts o = opts(1, 2, 2);
    refused(&o, FERRY_EINVAL, "rank 2 of 2");
    o = opts(1, 3, 2);
    refused(&o, FERRY_EINVAL, "rank 3 of 2");
}

CO_TEST(comm_create, refuses_a_negative_rank)
{
    make_hub();
    rt_comm_opts o = opts(1, -1, 2);
    refused(&o, FERRY_EINVAL, "rank -1 of 2");
}

CO_TEST(comm_create, refuses_a_world_of_0)
{
    make_hub();
    rt_comm_opts o = opts(1, 0, 0);
    refused(&o, FERRY_EINVAL, "world 0");
}

CO_TEST(comm_create, refuses_a_missing_peer_list)
{
    make_hub();
    rt_comm_opts o = opts(1, 0, 2);
    o.peers = NULL;
    refused(&o, FERRY_EINVAL, "peers NULL");
}

CO_TEST(comm_create, refuses_an_empty_peer_address)
{
    make_hub();
    const char *const peers[] = {"127.0.0.1:1", ""};
    rt_comm_opts o = opts(1, 0, 2);
    o.peers = peers;
    refused(&o, FERRY_EINVAL, "peer 1 empty");
}

CO_TEST(comm_create, refuses_a_session_of_two_ranks_without_its_secret)
{
    make_hub();
    rt_comm_opts o = opts(1, 0, 2);
    o.secret = NULL;
    refused(&o, FERRY_EINVAL, "no secret");
}

CO_TEST(comm_create, refuses_a_session_id_already_in_its_hub)
{
    make_hub();
    rt_comm_opts o = opts(42, 0, 2);
    char err[CO_ERRLEN] = "";
    int rc = rt_comm_create(R.r[0].hub, &o, &R.r[0].comm, err, sizeof err);
    cr_assert(rc == 0, "the first session 42: %s: %s", ferry_err_name(rc), err);
    cr_assert(rt_comm_rank(R.r[0].comm) == 0 && rt_comm_world(R.r[0].comm) == 2);

    o = opts(42, 1, 2);
    refused(&o, FERRY_EEXIST, "a second session 42");

    /* Another id in the same hub, and the same id in another hub, are fine. */
    o = opts(43, 1, 2);
    rc = rt_comm_create(R.r[0].hub, &o, &R.r[1].comm, err, sizeof err);
    cr_assert(rc == 0, "session 43 beside 42: %s: %s", ferry_err_name(rc), err);
    co_make_hub(2);
    o = opts(42, 1, 2);
    rc = rt_comm_create(R.r[2].hub, &o, &R.r[2].comm, err, sizeof err);
    cr_assert(rc == 0, "session 42 in another hub: %s: %s", ferry_err_name(rc), err);

    /* Once destroyed, its id is free. */
    rt_comm_destroy(R.r[0].comm);
    R.r[0].comm = NULL;
    o = opts(42, 0, 2);
    rc = rt_comm_create(R.r[0].hub, &o, &R.r[0].comm, err, sizeof err);
    cr_assert(rc == 0, "session 42 again after its destroy: %s: %s", ferry_err_name(rc),
              err);
}

CO_TEST(comm_create, destroy_and_hub_destroy_take_null)
{
    rt_comm_destroy(NULL);
    rt_hub_destroy(NULL);
}

CO_TEST(comm_create, a_hub_needs_a_poller)
{
    rt_hub *h = (rt_hub *)&h;
    cr_assert(rt_hub_create(NULL, &h) == FERRY_EINVAL);
    cr_assert(h == NULL, "*out was left set on failure");
}

Test(compress_names, parse_none_empty_lz4_and_fp16_and_refuse_the_rest)
{
    cr_assert_eq(rt_compress_parse("none"), RT_COMPRESS_NONE);
    cr_assert_eq(rt_compress_parse(""), RT_COMPRESS_NONE);
    cr_assert_eq(rt_compress_parse("lz4"), RT_COMPRESS_LZ4);
    cr_assert_eq(rt_compress_parse("fp16"), RT_COMPRESS_FP16);
    cr_assert_eq(rt_compress_parse("zstd"), -1);
    cr_assert_eq(rt_compress_parse("fp32"), -1);
    cr_assert_eq(rt_compress_parse("lz4 "), -1);
}

Test(compress_names, each_name_parses_back_to_its_mode)
{
    const rt_compress all[] = {RT_COMPRESS_NONE, RT_COMPRESS_LZ4, RT_COMPRESS_FP16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = rt_compress_name(all[i]);
        cr_assert(name && name[0], "mode %d has no name", all[i]);
        cr_assert_eq(rt_compress_parse(name), (int)all[i], "\"%s\" parses to %d, not %d",
                     name, rt_compress_parse(name), all[i]);
    }
}
