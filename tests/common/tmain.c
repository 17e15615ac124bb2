/* Criterion's default main, with one change for sanitizer builds: the
 * runner process itself (Criterion 2.4.1) now and then loses a small
 * allocation while tests run in parallel, and LeakSanitizer would fail the
 * whole run for it. Its allocations are not checked; every test process
 * still is, by tcom_assert_no_leaks() at the end of each test. */
#include <criterion/criterion.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
#ifdef __SANITIZE_ADDRESS__
    __lsan_disable();
#endif
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}
