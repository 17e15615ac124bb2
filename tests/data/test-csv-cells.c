/* tests/data — a cell read where it stands (csv.c's plain lines) reads as
 * rt_csv_number reads the same cell alone: the same number, or the same
 * refusal, whichever path the line takes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"

static const char *const cells[] = {
    "1.5",    " 1.5",  "1.5 ",   "\t-0.25", "+3",       "1e3",       "1E-3",
    "2.5e+2", ".5",    "5.",     "0",       "-0",       "0x10",      "1e",
    "12abc",  "1.5.2", "-",      "",        "1e400",    "nan",       "inf",
    "12345678901234567890123", "0.000000000000000000000001", "3.14159265358979",
    "-99999.99999",
};

/* The cell in the first column of a one-row CSV, then a label: 0 and the
 * number, or the parse's error. */
static int parse_cell(const char *cell, float *x)
{
    char buf[256], err[512];
    int n = snprintf(buf, sizeof buf, "a,label\n%s,1\n", cell);
    rt_csv c;
    int rc = rt_csv_parse("cells.csv", buf, (size_t)n, NULL, &c, err, sizeof err);
    if (rc == 0) {
        *x = c.x[0];
        rt_csv_free(&c);
    }
    return rc;
}

TD_TEST(csv_cells, a_cell_read_in_place_reads_as_the_same_cell_alone)
{
    for (size_t i = 0; i < sizeof cells / sizeof *cells; i++) {
        double want;
        bool number = rt_csv_number(cells[i], strlen(cells[i]), &want);
        bool finite = number && isfinite((float)want);
        float got = 0;
        int rc = parse_cell(cells[i], &got);
        cr_expect_eq(rc == 0, finite, "\"%s\": parsed %d, a finite number %d", cells[i],
                     rc, finite);
        if (rc == 0 && finite)
            cr_expect(got == (float)want, "\"%s\": %.9g, alone %.9g", cells[i], got,
                      (float)want);
    }
}

TD_TEST(csv_cells, the_label_column_reads_numbers_and_names_alike_either_way)
{
    const char text[] = "a,b,label\n1.5,2,cat\n-3,4.25,7\n";
    rt_csv c;
    char err[512];
    cr_assert_eq(rt_csv_parse("l.csv", text, sizeof text - 1, NULL, &c, err, sizeof err), 0,
                 "%s", err);
    cr_expect_eq(c.n_classes, 2, "names: \"7\" is a name once the first row's is");
    cr_expect(c.x[0] == 1.5f && c.x[1] == 2.0f && c.x[2] == -3.0f && c.x[3] == 4.25f);
    rt_csv_free(&c);
}
