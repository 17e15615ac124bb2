/* printf into new memory and into a caller's error buffer. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tcommon.h"

Test(base_format, asprintf_returns_the_formatted_text_to_free)
{
    char *s = base_asprintf("peer %s method %s: %d", "127.0.0.1:7100", "Ping", 42);
    cr_assert(s);
    cr_expect_str_eq(s, "peer 127.0.0.1:7100 method Ping: 42");
    free(s);
    tcom_assert_no_leaks();
}

Test(base_format, errf_writes_the_message_and_returns_the_code)
{
    char err[64] = "";
    cr_expect_eq(base_errf(err, sizeof err, FERRY_EINVAL, "bad %s", "port"),
                 FERRY_EINVAL);
    cr_expect_str_eq(err, "bad port");
}

Test(base_format, errf_cuts_a_long_message_to_the_buffer)
{
    char err[8];
    memset(err, 'x', sizeof err);
    cr_expect_eq(base_errf(err, sizeof err, FERRY_ENOMEM, "%s", "out of memory"),
                 FERRY_ENOMEM);
    cr_expect_str_eq(err, "out of ");
}

Test(base_format, errf_without_a_buffer_only_returns_the_code)
{
    cr_expect_eq(base_errf(NULL, 100, FERRY_EIO, "unused %d", 1), FERRY_EIO);
    char err[4] = "abc";
    cr_expect_eq(base_errf(err, 0, FERRY_EIO, "unused"), FERRY_EIO);
    cr_expect_str_eq(err, "abc");
}

Test(base_format, strdup_takes_null)
{
    cr_expect_null(base_strdup(NULL));
    char *s = base_strdup("token");
    cr_assert(s);
    cr_expect_str_eq(s, "token");
    free(s);
}
