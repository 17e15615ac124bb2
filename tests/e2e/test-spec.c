/* The training spec (proto/train_spec.h) against what `ferry submit` does
 * with it: every declared option is in --help, travels through the
 * TrainBegin message and back as it was, and is refused out of its bounds
 * with the message submit gives. */
#include <float.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "e2e.h"
#include "proto/train_spec.h"

TestSuite(e2e_spec, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

Test(e2e_spec, every_option_is_in_submits_help)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", "--help", NULL);
    E2E_EXPECT(&r, 0);
    for (int i = 0; i < PROTO_TRAIN_OPTIONS; i++) {
        const proto_train_row *row = &proto_train_rows[i];
        char line[256];
        /* The option's left column, then its help's first line. */
        size_t first = strcspn(row->help, "\n");
        if (row->letter)
            snprintf(line, sizeof line, "  -%c, --%s %s", row->letter, row->flag,
                     row->value);
        else
            snprintf(line, sizeof line, "      --%s %s", row->flag, row->value);
        const char *at = strstr(r.out, line);
        cr_expect(at, "--%s is not in --help:\n%s", row->flag, r.out);
        if (at)
            cr_expect(strncmp(strchr(at, '\n') - first, row->help, first) == 0,
                      "--%s's help is not its declared one:\n%s", row->flag, r.out);
        char flag[64];
        snprintf(flag, sizeof flag, "--%s ", row->flag);
        cr_expect(strstr(r.out, flag), "no %s in --help", flag);
    }
    e2e_run_fini(&r);
}

/* `s` with each option set, from text as submit takes it, to a value that
 * is not its default: a number's highest, a name's last, 0.5 for the
 * fractions. */
static void not_defaults(proto_train_spec *s)
{
    proto_train_spec_defaults(s);
    for (int i = 0; i < PROTO_TRAIN_OPTIONS; i++) {
        const proto_train_row *row = &proto_train_rows[i];
        /* Strings are kept, not copied: a name from the table, a literal. */
        const char *v = "/elsewhere/data";
        char number[64];
        if (row->type == PROTO_TRAIN_INT || row->type == PROTO_TRAIN_U64) {
            snprintf(number, sizeof number, "%ld", row->ihi);
            v = number;
        } else if (row->type == PROTO_TRAIN_DOUBLE) {
            v = "0.5";
        } else if (row->type == PROTO_TRAIN_NAME) {
            for (const char *const *n = row->names; *n; n++)
                v = *n;
        }
        cr_assert_null(proto_train_spec_set(s, (proto_train_option)i, v), "--%s %s",
                       row->flag, v);
    }
}

/* Packs `in` as a begin (with the ranks' options when `peers`), through
 * its bytes, and unpacks it as a rank does. */
static proto_train_begin *through_the_wire(const proto_train_spec *in, bool peers)
{
    proto_bytes b = {0};
    cr_assert_eq(proto_train_begin_pack(in, peers, &(proto_train_begin_run){0}, &b), 0);
    proto_train_begin *m = NULL;
    cr_assert_eq(proto_train_begin_unpack(b.data, b.len, &m), 0);
    proto_bytes_fini(&b);
    return m;
}

/* What each type of option is after the wire: doubles travel as floats, a
 * missing string as "". */
#define SAME_INT(got, want, flag) cr_expect_eq(got, want, "--%s: %ld", flag, (long)got)
#define SAME_U64(got, want, flag) SAME_INT(got, want, flag)
#define SAME_DOUBLE(got, want, flag)                                                     \
    cr_expect_eq(got, (double)(float)want, "--%s: %g", flag, got)
#define SAME_NAME(got, want, flag)                                                       \
    cr_expect_str_eq(got ? got : "", want ? want : "", "--%s", flag)
#define SAME_TEXT                  SAME_NAME
#define EXPECT_SAME(field, l, flag, type, ...)                                           \
    SAME_##type(got.field, expected(PROTO_TRAIN_OPT_##field, in, &def, peers)->field,    \
                flag);

/* What option `opt` of `in` is after the wire: the default when it does
 * not travel, nothing (0, "") for the ranks' options of a run of one. */
static const proto_train_spec *expected(proto_train_option opt,
                                        const proto_train_spec *in,
                                        const proto_train_spec *def, bool peers)
{
    static const proto_train_spec nothing;
    proto_train_travel t = proto_train_rows[opt].travels;
    if (t == PROTO_TRAIN_LOCAL)
        return def;
    return t == PROTO_TRAIN_ALWAYS || peers ? in : &nothing;
}

static void expect_round_trip(const proto_train_spec *in, bool peers)
{
    proto_train_spec def;
    proto_train_spec_defaults(&def);
    proto_train_begin *m = through_the_wire(in, peers);
    proto_train_spec got = m->spec;
    PROTO_TRAIN_SPEC(EXPECT_SAME)
    proto_train_begin_free(m);
}

Test(e2e_spec, every_option_round_trips_through_the_begin_message)
{
    proto_train_spec s;
    proto_train_spec_defaults(&s);
    expect_round_trip(&s, true);
    expect_round_trip(&s, false);
    not_defaults(&s);
    expect_round_trip(&s, true);
    expect_round_trip(&s, false);
    /* The values given are not the defaults, or the test proves little. */
    proto_train_spec def;
    proto_train_spec_defaults(&def);
    cr_assert_neq(s.epochs, def.epochs);
    cr_assert_str_neq(s.optimizer, def.optimizer);
}

/* A value below option `row`'s bounds (`low`) or above, as text; false if
 * it has none that side. */
static bool out_of_bounds(const proto_train_row *row, bool low, char *v, size_t len)
{
    switch (row->type) {
    case PROTO_TRAIN_INT:
    case PROTO_TRAIN_U64:
        if (low)
            snprintf(v, len, "%lld", (long long)row->ilo - 1);
        else
            snprintf(v, len, "%llu", (unsigned long long)row->ihi + 1);
        return true;
    case PROTO_TRAIN_DOUBLE:
        snprintf(v, len, "%.17g", low ? (row->dlo > 0 ? 0 : row->dlo - 1) : row->dhi * 2);
        return true;
    case PROTO_TRAIN_NAME:
        snprintf(v, len, "%s", low ? "" : "nosuch");
        return true;
    default: /* TEXT: any value */
        return false;
    }
}

Test(e2e_spec, every_option_out_of_its_bounds_is_refused_with_submits_message)
{
    int refused = 0, text = 0;
    for (int i = 0; i < PROTO_TRAIN_OPTIONS; i++) {
        const proto_train_row *row = &proto_train_rows[i];
        text += row->type == PROTO_TRAIN_TEXT;
        for (int low = 0; low < 2; low++) {
            char v[64], flag[64], want[512];
            if (!out_of_bounds(row, low, v, sizeof v))
                continue;
            snprintf(flag, sizeof flag, "--%s", row->flag);
            snprintf(want, sizeof want, "ferry submit: %s: expected %s, got '%s'\n", flag,
                     row->expected, v);
            e2e_run r;
            e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), flag, v, NULL);
            E2E_EXPECT(&r, 2);
            cr_expect(strstr(r.err, want), "%s %s: wanted %s, got:\n%s", flag, v, want,
                      r.err);
            e2e_run_fini(&r);
            refused++;
        }
    }
    cr_assert(text >= 1);
    cr_assert_eq(refused, 2 * (PROTO_TRAIN_OPTIONS - text), "every option but the paths");
}
