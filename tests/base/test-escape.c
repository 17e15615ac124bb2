/* Text from the wire made printable, and cut with a mark when long. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"

Test(base_escape, printable_text_is_copied_as_it_is)
{
    char buf[64];
    const char *s = "ferry.train.sync";
    cr_expect_str_eq(base_escape(buf, sizeof buf, s, strlen(s)), s);
}

Test(base_escape, backslashes_controls_and_high_bytes_are_escaped)
{
    char buf[128];
    const char s[] = "a\\b\n\x1b[0m\xff\0z";
    base_escape(buf, sizeof buf, s, sizeof s - 1);
    cr_expect_str_eq(buf, "a\\\\b\\x0a\\x1b[0m\\xff\\x00z");
}

Test(base_escape, a_long_text_is_cut_and_marked_with_its_length)
{
    char src[1000], buf[64];
    memset(src, 'm', sizeof src);
    base_escape(buf, sizeof buf, src, sizeof src);
    /* 64 - 40 bytes of text are kept, then the mark. */
    cr_expect_str_eq(buf, "mmmmmmmmmmmmmmmmmmmmmmmm...(1000 bytes)");
}
