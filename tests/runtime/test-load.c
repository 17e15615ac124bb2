/* tests/runtime — LoadModule and the content-addressed cache, through real
 * calls: every bad module gets a clear error naming it, and the worker goes
 * on serving. */
#include "rth.h"

#include "ferry.pb-c.h"
#include "proto/raw.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

TestSuite(rt_load, .init = rth_setup, .fini = rth_teardown, .timeout = 60);

static char *faulty_sha(char sha[RT_SHA256_HEX])
{
    size_t len;
    char *bytes = rth_read_file(rth_module("faulty.so"), &len);
    cr_assert(bytes);
    rt_sha256_hex(bytes, len, sha);
    free(bytes);
    return sha;
}

/* The names in the worker's cache directory, space-separated. */
static void cache_listing(char *buf, size_t len)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", R.state);
    DIR *d = opendir(dir);
    cr_assert(d, "no cache directory %s", dir);
    buf[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "%s%s", n ? " " : "", e->d_name);
    }
    closedir(d);
}

static uint32_t modules_loaded(void)
{
    proto_stats_reply *s = rth_stats(R.ch);
    uint32_t n = s->modules_loaded;
    proto_free(s);
    return n;
}

RTH_TEST(rt_load, loading_the_same_bytes_twice_is_a_no_op)
{
    proto_load_module_reply *r = NULL;
    char err[1024];
    int rc = rth_load(R.ch, "faulty.so", NULL, true, &r, err, sizeof err);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), err);
    cr_assert_str_eq(r->task_name, "faulty");
    cr_assert(!r->cached, "first load reported cached");
    cr_assert(r->n_functions == 8, "%zu functions", r->n_functions);
    cr_assert_str_eq(r->functions[0], "fail");
    cr_assert_str_eq(r->functions[3], "echo");
    proto_free(r);

    rc = rth_load(R.ch, "faulty.so", NULL, true, &r, err, sizeof err);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), err);
    cr_assert(r->cached, "second load of the same bytes was not cached");
    cr_assert_str_eq(r->task_name, "faulty");
    proto_free(r);

    /* Known bytes need not travel again. */
    rc = rth_load(R.ch, "faulty.so", NULL, false, &r, err, sizeof err);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), err);
    cr_assert(r->cached);
    proto_free(r);

    cr_assert(modules_loaded() == 1);
    char sha[RT_SHA256_HEX], list[1024], want[100];
    cache_listing(list, sizeof list);
    snprintf(want, sizeof want, "%s.so", faulty_sha(sha));
    cr_assert_str_eq(list, want, "cache holds '%s'", list);
}

RTH_TEST(rt_load, bytes_that_do_not_match_their_sha256_are_refused)
{
    char sha[RT_SHA256_HEX], err[1024];
    faulty_sha(sha);
    sha[0] = sha[0] == '0' ? '1' : '0';
    int rc = rth_load(R.ch, "faulty.so", sha, true, NULL, err, sizeof err);
    cr_assert(rc == FERRY_ECORRUPT, "%s: %s", ferry_err_name(rc), err);
    cr_assert(strstr(err, "sha256 mismatch"), "%s", err);
    cr_assert(strstr(err, "faulty.so"), "the module is not named: %s", err);
    cr_assert(modules_loaded() == 0);
    char list[1024];
    cache_listing(list, sizeof list);
    cr_assert_str_eq(list, "", "cache holds '%s'", list);
}

RTH_TEST(rt_load, an_unknown_module_without_bytes_asks_for_them)
{
    char sha[RT_SHA256_HEX], err[1024];
    faulty_sha(sha);
    int rc = rth_load(R.ch, "faulty.so", NULL, false, NULL, err, sizeof err);
    cr_assert(rc == FERRY_ENOENT, "%s: %s", ferry_err_name(rc), err);
    cr_assert(strstr(err, "module faulty.so"), "%s", err);
    cr_assert(strstr(err, sha), "%s", err);
    cr_assert(strstr(err, "not cached: send its bytes"), "%s", err);
}

RTH_TEST(rt_load, a_digest_that_is_not_hex_never_becomes_a_path)
{
    char err[1024];
    const char *bad[] = {
        "../../../../tmp/evil", "", "ABCDEF",
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeF"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = rth_load(R.ch, "faulty.so", bad[i], false, NULL, err, sizeof err);
        cr_assert(rc == FERRY_EINVAL, "'%s': %s", bad[i], ferry_err_name(rc));
        cr_assert(strstr(err, "not 64 lower-case hex digits"), "%s", err);
    }
}

/* Loads `name` and expects FERRY_EINVAL with `want` in the text; then the
 * worker must still answer and load a good module. */
static void bad_module(const char *name, const char *want)
{
    char err[1024];
    int rc = rth_load(R.ch, name, NULL, true, NULL, err, sizeof err);
    cr_assert(rc == FERRY_EINVAL, "%s: %s: %s", name, ferry_err_name(rc), err);
    cr_assert(strstr(err, want), "%s: text '%s' lacks '%s'", name, err, want);
    char list[1024];
    cache_listing(list, sizeof list);
    cr_assert_str_eq(list, "", "a module that failed left '%s' in the cache", list);
    cr_assert(modules_loaded() == 0);

    cr_assert(rth_ping(R.ch, NULL) == 0);
    char sha[RT_SHA256_HEX], *out = NULL;
    rth_load_faulty(sha);
    rc = rth_invoke(R.ch, sha, "echo", "still here", &out, err, sizeof err);
    cr_assert(rc == 0, "%s", err);
    cr_assert_str_eq(out, "still here");
    free(out);
}

RTH_TEST(rt_load, a_file_that_is_not_elf_is_named_and_refused)
{
    bad_module("notelf.so", "notelf.so: not an ELF shared object");
}

RTH_TEST(rt_load, a_truncated_shared_object_is_named_and_refused)
{
    bad_module("truncated.so", "truncated.so: truncated ELF file: 1000 bytes");
}

RTH_TEST(rt_load, a_module_the_loader_refuses_is_named_with_its_reason)
{
    bad_module("unresolved.so",
               "unresolved.so: cannot load: undefined symbol: ferry_test_missing_symbol");
}

RTH_TEST(rt_load, a_shared_object_with_no_descriptor_is_named_and_refused)
{
    bad_module("nodesc.so", "nodesc.so: no ferry_task symbol: not a ferry task module");
}

RTH_TEST(rt_load, an_abi_version_mismatch_is_named_and_refused)
{
    bad_module("badabi.so", "badabi.so: ABI version 99, this ferry speaks 1");
}

RTH_TEST(rt_load, the_cache_survives_a_restart_of_the_worker)
{
    char sha[RT_SHA256_HEX], err[1024];
    rth_load_faulty(sha);
    rth_disconnect();
    rt_worker_destroy(R.worker, 0);
    R.worker = NULL;

    rt_worker_opts o = {.rank = 2};
    rth_start_worker(&o);
    cr_assert(modules_loaded() == 0);
    proto_load_module_reply *r = NULL;
    int rc = rth_load(R.ch, "faulty.so", NULL, false, &r, err, sizeof err);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), err);
    cr_assert(r->cached, "bytes from the earlier run were not reported as cached");
    proto_free(r);
    char *out = NULL;
    rc = rth_invoke(R.ch, sha, "echo", "again", &out, err, sizeof err);
    cr_assert(rc == 0, "%s", err);
    cr_assert_str_eq(out, "again");
    free(out);
}

RTH_TEST(rt_load, a_damaged_cache_file_is_not_trusted)
{
    char sha[RT_SHA256_HEX], err[1024], path[512];
    rth_load_faulty(sha);
    rth_disconnect();
    rt_worker_destroy(R.worker, 0);
    R.worker = NULL;
    snprintf(path, sizeof path, "%s/cache/%s.so", R.state, sha);
    int fd = open(path, O_WRONLY);
    cr_assert(fd >= 0);
    cr_assert(pwrite(fd, "XX", 2, 4000) == 2);
    close(fd);

    rt_worker_opts o = {.rank = 2};
    rth_start_worker(&o);
    int rc = rth_load(R.ch, "faulty.so", NULL, false, NULL, err, sizeof err);
    cr_assert(rc == FERRY_ENOENT, "%s: %s", ferry_err_name(rc), err);
    cr_assert(access(path, F_OK) != 0, "the damaged file was kept");
    rc = rth_load(R.ch, "faulty.so", NULL, true, NULL, err, sizeof err);
    cr_assert(rc == 0, "%s", err);
}

RTH_TEST(rt_load, concurrent_loads_of_one_module_load_it_once)
{
    size_t len;
    char *bytes = rth_read_file(rth_module("faulty.so"), &len);
    char sha[RT_SHA256_HEX];
    rt_sha256_hex(bytes, len, sha);
    Ferry__LoadModuleRequest req = FERRY__LOAD_MODULE_REQUEST__INIT;
    req.sha256 = sha;
    req.name = "faulty.so";
    enum { N = 6 };
    rpc_call calls[N];
    rpc_call *ptrs[N];
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data,
                       .head_len = out_head.len,
                       .payload = bytes,
                       .payload_len = len};
    for (int i = 0; i < N; i++) {
        memset(&calls[i], 0, sizeof calls[i]);
        ptrs[i] = &calls[i];
        cr_assert(rpc_call_start(R.ch, &calls[i], PROTO_METHOD_LOAD_MODULE, &out,
                                 RTH_CALL_TIMEOUT, NULL) == 0);
    }
    int rc = rpc_call_wait_all(ptrs, N);
    cr_assert(rc == 0, "%s", ferry_err_name(rc));
    int fresh = 0;
    for (int i = 0; i < N; i++) {
        proto_load_module_reply *r = NULL;
        cr_assert(proto_load_module_reply_unpack(calls[i].reply.head,
                                                 calls[i].reply.head_len, &r) == 0);
        fresh += !r->cached;
        proto_free(r);
        rpc_call_fini(&calls[i]);
    }
    free(bytes);
    cr_assert(fresh == 1, "%d loads were not cached", fresh);
    cr_assert(modules_loaded() == 1);
}
