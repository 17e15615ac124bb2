/* The public error table and version, through libferry.so exactly as a
 * program that includes <ferry/ferry.h> sees them (only ferry_* exported). */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include <ferry/ferry.h>

static const int all_codes[] = {
#define CODE(name, value, msg) FERRY_##name,
    FERRY_ERRNO_MAP(CODE)
#undef CODE
};
#define N_CODES (sizeof all_codes / sizeof all_codes[0])

Test(ferry_error, every_code_has_its_own_name_and_message)
{
    for (size_t i = 0; i < N_CODES; i++) {
        cr_assert(all_codes[i] < 0, "code %d is not negative", all_codes[i]);
        cr_assert_str_neq(ferry_err_name(all_codes[i]), "UNKNOWN");
        for (size_t j = 0; j < i; j++) {
            cr_assert(all_codes[i] != all_codes[j], "%s and %s share %d",
                      ferry_err_name(all_codes[i]), ferry_err_name(all_codes[j]),
                      all_codes[i]);
            cr_assert_str_neq(ferry_err_name(all_codes[i]), ferry_err_name(all_codes[j]));
        }
    }
}

Test(ferry_error, posix_codes_equal_minus_errno)
{
    cr_assert_eq(FERRY_EINVAL, -EINVAL);
    cr_assert_eq(FERRY_ETIMEDOUT, -ETIMEDOUT);
    cr_assert_eq(FERRY_EADDRINUSE, -EADDRINUSE);
    cr_assert_eq(FERRY_ECANCELED, -ECANCELED);
    cr_assert_str_eq(ferry_err_name(-ENOMEM), "ENOMEM");
}

Test(ferry_error, unknown_codes_are_named_unknown)
{
    cr_assert_str_eq(ferry_err_name(0), "UNKNOWN");
    cr_assert_str_eq(ferry_err_name(-99999), "UNKNOWN");
    cr_assert_str_eq(ferry_strerror(12345), "unknown error");
}

Test(ferry_error, messages_read_as_text)
{
    cr_assert_str_eq(ferry_strerror(FERRY_ETIMEDOUT), "deadline exceeded");
    cr_assert_str_eq(ferry_strerror(FERRY_EUNAUTH), "missing or wrong cluster token");
    cr_assert(strlen(ferry_strerror(FERRY_ECORRUPT)) > 0);
}

Test(ferry_version, library_matches_header)
{
    cr_assert_str_eq(ferry_version(), FERRY_VERSION_STRING);
    cr_assert(FERRY_VERSION_MAJOR >= 0 && FERRY_VERSION_MINOR >= 0 &&
              FERRY_VERSION_PATCH >= 0);
}
