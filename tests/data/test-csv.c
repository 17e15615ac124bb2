/* tests/data — CSV and TSV: the label column found, string labels mapped to
 * sorted class indices, and every refusal saying file, line and column. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"
#include "tfiles.h"

static int parse(const char *text, const char *label, rt_csv *c, char *err, size_t errlen)
{
    const char *path = td_path("t.csv");
    tf_write_text(path, text);
    return rt_csv_parse(path, text, strlen(text), label, c, err, errlen);
}

static void expect_refused(const char *text, const char *label, int code, const char *want)
{
    rt_csv c;
    char err[512] = "";
    int rc = parse(text, label, &c, err, sizeof err);
    td_expect_err(rc, code, err, td_path("t.csv"));
    cr_expect(strstr(err, want), "want \"%s\" in: %s", want, err);
}

TD_TEST(csv, string_labels_become_sorted_classes)
{
    rt_csv c;
    char err[512] = "";
    const char *t = "a,species,b\n1,dog,2\n3,cat,4\n\"5\",emu,6\n7,cat,8\n";
    cr_assert_eq(parse(t, "species", &c, err, sizeof err), 0, "%s", err);
    cr_expect_eq(c.rows, 4);
    cr_expect_eq(c.features, 2);
    cr_assert_eq(c.n_classes, 3);
    cr_expect_str_eq(c.classes[0], "cat");
    cr_expect_str_eq(c.classes[1], "dog");
    cr_expect_str_eq(c.classes[2], "emu");
    cr_expect(c.y[0] == 1 && c.y[1] == 0 && c.y[2] == 2 && c.y[3] == 0);
    cr_expect(c.x[0] == 1 && c.x[1] == 2 && c.x[4] == 5 && c.x[7] == 8);
    rt_csv_free(&c);
}

TD_TEST(csv, without_a_usual_name_the_last_column_is_the_label)
{
    rt_csv c;
    char err[512] = "";
    cr_assert_eq(parse("a,b,c\n1,2,0\n", NULL, &c, err, sizeof err), 0, "%s", err);
    cr_expect_eq(c.label_col, 2);
    rt_csv_free(&c);
}

TD_TEST(csv, a_usual_label_name_is_found_and_tabs_are_read)
{
    rt_csv c;
    char err[512] = "";
    cr_assert_eq(parse("x1\tTarget\tx2\n1.5\t0\t2\n3\t1\t-4e2\n", NULL, &c, err, sizeof err),
                 0, "%s", err);
    cr_expect_eq(c.label_col, 1);
    cr_expect(c.x[0] == 1.5f && c.x[3] == -400.0f);
    cr_expect(c.y[1] == 1);
    rt_csv_free(&c);
}

TD_TEST(csv, a_quoted_field_may_hold_commas_and_newlines)
{
    rt_csv c;
    char err[512] = "";
    cr_assert_eq(parse("a,label\n1,\"big, red\"\n2,\"two\nlines\"\n3,x\n", NULL, &c, err,
                       sizeof err),
                 0, "%s", err);
    cr_expect_eq(c.rows, 3);
    cr_expect_str_eq(c.classes[0], "big, red");
    rt_csv_free(&c);
}

TD_TEST(csv, a_non_numeric_cell_names_line_column_and_text)
{
    expect_refused("a,b,label\n1,2,0\n3,oops,1\n", NULL, FERRY_ECORRUPT,
                   "line 3, column 2 (b): \"oops\" is not a number");
    expect_refused("a,b,label\n1,,0\n", NULL, FERRY_ECORRUPT, "line 2, column 2 (b): \"\"");
}

TD_TEST(csv, a_ragged_row_says_expected_and_found_columns)
{
    expect_refused("a,b,label\n1,2,0\n3,1\n", NULL, FERRY_ECORRUPT,
                   "line 3: 3 columns expected (as the header), 2 found");
    expect_refused("a,b,label\n1,2,0,9\n", NULL, FERRY_ECORRUPT,
                   "line 2: 3 columns expected (as the header), 4 found");
}

TD_TEST(csv, an_empty_file_and_a_header_alone_are_refused)
{
    expect_refused("", NULL, FERRY_ECORRUPT, "empty file");
    expect_refused("a,b,label\n", NULL, FERRY_ECORRUPT, "a header and no rows");
}

TD_TEST(csv, nan_and_infinity_give_their_count_and_first_place)
{
    expect_refused("a,b,label\n1,2,0\n3,nan,1\ninf,1,0\n", NULL, FERRY_ECORRUPT,
                   "2 NaN or infinite values, the first at line 3, column 2");
}

TD_TEST(csv, a_missing_label_column_lists_the_columns)
{
    expect_refused("a,b,label\n1,2,0\n", "kind", FERRY_ENOENT,
                   "no label column \"kind\" (its columns: a, b, label)");
}

TD_TEST(csv, float_labels_are_regression_targets)
{
    tf_write_text(td_path("r.csv"), "a,b,y\n1,2,0.5\n3,4,1.25\n5,6,2\n7,8,-1\n");
    rt_data_source s = {.path = td_path("r.csv"), .test_path = td_path("r.csv"),
                        .normalize = "none"};
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_expect(tr.labels == NULL && tr.targets && tr.outputs == 1);
    cr_expect(tr.targets[1] == 1.25f && tr.targets[3] == -1.0f);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}
