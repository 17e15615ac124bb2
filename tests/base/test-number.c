/* Whole-string numbers with bounds. */
#include <criterion/criterion.h>

#include "base/base.h"

Test(base_number, parse_long_takes_a_number_in_range_and_a_trailing_newline)
{
    long v = -1;
    cr_expect(base_parse_long("7100", 1, 65535, &v));
    cr_expect_eq(v, 7100);
    cr_expect(base_parse_long("42\n", 0, 100, &v));
    cr_expect_eq(v, 42);
    cr_expect(base_parse_long("-5", -10, 10, &v));
    cr_expect_eq(v, -5);
}

Test(base_number, parse_long_refuses_and_leaves_out_alone)
{
    const char *bad[] = {"", "x", "12x", "12 ", "65536", "0", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long v = 77;
        cr_expect(!base_parse_long(bad[i], 1, 65535, &v), "'%s'", bad[i]);
        cr_expect_eq(v, 77, "'%s'", bad[i]);
    }
}

Test(base_number, parse_double_takes_a_finite_number_in_range)
{
    double v = 0;
    cr_expect(base_parse_double("0.25", 0, 1, &v));
    cr_expect_float_eq(v, 0.25, 1e-12);
    cr_expect(base_parse_double("1e-3", 0, 1, &v));
    cr_expect_float_eq(v, 1e-3, 1e-15);
}

Test(base_number, parse_double_refuses_and_leaves_out_alone)
{
    const char *bad[] = {"", "x", "0.5x", "0.5\n", "2", "-0.1", "nan", "inf", "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = 9;
        cr_expect(!base_parse_double(bad[i], 0, 1, &v), "'%s'", bad[i]);
        cr_expect_float_eq(v, 9, 0, "'%s'", bad[i]);
    }
}
