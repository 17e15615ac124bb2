/* tests/runtime — rt_module and rt_sha256_hex on their own, no server. */
#include "rth.h"

#include <string.h>

TestSuite(rt_module, .init = rth_setup_dir, .fini = rth_teardown, .timeout = 60);

RTH_TEST(rt_module, sha256_matches_known_digests)
{
    char hex[RT_SHA256_HEX];
    rt_sha256_hex("", 0, hex);
    cr_assert_str_eq(hex,
                     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    rt_sha256_hex("abc", 3, hex);
    cr_assert_str_eq(hex,
                     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

RTH_TEST(rt_module, a_good_module_gives_its_task_and_functions)
{
    rt_module m;
    char err[512] = "";
    int rc = rt_module_open(&m, rth_module("faulty.so"), "faulty.so", err, sizeof err);
    cr_assert(rc == 0, "%s", err);
    cr_assert_str_eq(m.task->name, "faulty");
    cr_assert_str_eq(m.name, "faulty.so");
    cr_assert(rt_module_function(&m, "echo") != NULL);
    cr_assert(rt_module_function(&m, "nope") == NULL);
    cr_assert(rt_module_function(&m, "") == NULL);
    char list[256];
    rt_module_list(&m, list, sizeof list);
    cr_assert_str_eq(list, "fail, segv, abort, echo, sleep, info, overflow, nap");
    char tiny[12];
    rt_module_list(&m, tiny, sizeof tiny);
    cr_assert(memchr(tiny, 0, sizeof tiny), "a small buffer was overrun");
    rt_module_close(&m);
    cr_assert(m.handle == NULL && m.task == NULL);
}

/* Opens `file` known as `name` (NULL: the file's own name) and expects
 * FERRY_EINVAL with exactly `want` at the start of the text. */
static void refused(const char *file, const char *name, const char *want)
{
    rt_module m;
    char err[512] = "";
    int rc = rt_module_open(&m, rth_module(file), name, err, sizeof err);
    cr_assert(rc == FERRY_EINVAL, "%s: %s", file, ferry_err_name(rc));
    cr_assert(strncmp(err, want, strlen(want)) == 0, "%s: '%s', expected '%s...'", file,
              err, want);
    cr_assert(m.handle == NULL, "%s: left open", file);
}

RTH_TEST(rt_module, each_bad_module_is_refused_by_name)
{
    refused("notelf.so", "notelf.so", "notelf.so: not an ELF shared object");
    refused("truncated.so", "truncated.so",
            "truncated.so: truncated ELF file: 1000 bytes");
    refused("unresolved.so", "unresolved.so",
            "unresolved.so: cannot load: undefined symbol: ferry_test_missing_symbol");
    refused("nodesc.so", "nodesc.so",
            "nodesc.so: no ferry_task symbol: not a ferry task module");
    refused("badabi.so", "badabi.so", "badabi.so: ABI version 99, this ferry speaks 1");
    /* Without a name, the file's own. */
    refused("badabi.so", NULL, "badabi.so: ABI version 99");
    refused("notelf.so", "user-facing.so", "user-facing.so: not an ELF");
}

RTH_TEST(rt_module, a_loader_error_names_the_module_not_the_file_path)
{
    rt_module m;
    char err[512] = "";
    const char *path = rth_module("unresolved.so");
    cr_assert(rt_module_open(&m, path, "cut.so", err, sizeof err) == FERRY_EINVAL);
    cr_assert(strncmp(err, "cut.so: cannot load: ", 21) == 0, "%s", err);
    cr_assert(!strstr(err, path), "the text repeats the path: %s", err);
}

RTH_TEST(rt_module, an_elf_object_that_is_not_shared_is_refused)
{
    /* This test program itself: ELF, but an executable (or a PIE, which
     * dlopen refuses), never a module. */
    rt_module m;
    char err[512] = "";
    int rc = rt_module_open(&m, "/proc/self/exe", "self", err, sizeof err);
    cr_assert(rc == FERRY_EINVAL, "%s", ferry_err_name(rc));
    cr_assert(strncmp(err, "self: ", 6) == 0, "%s", err);
}

RTH_TEST(rt_module, a_missing_file_is_named)
{
    rt_module m;
    char err[512] = "";
    char path[512];
    snprintf(path, sizeof path, "%s/absent.so", R.dir);
    cr_assert(rt_module_open(&m, path, "absent.so", err, sizeof err) == FERRY_EINVAL);
    cr_assert(strstr(err, "absent.so: cannot open: No such file"), "%s", err);
}
