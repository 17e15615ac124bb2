/* tests/data — the data options travel: set as `ferry submit` sets them,
 * packed into a rank's TrainBegin, unpacked as a worker unpacks it, and made
 * the source the worker reads. */
#include <stdlib.h>
#include <string.h>

#include "proto/train_spec.h"
#include "tdata.h"
#include "tfiles.h"

TD_TEST(spec, the_data_options_reach_the_worker)
{
    proto_train_spec sp;
    proto_train_spec_defaults(&sp);
    cr_expect_str_eq(sp.normalize, "standard");
    tf_write_text(td_path("d.csv"), "a,label\n1,0\n");
    struct {
        proto_train_option opt;
        const char *arg;
    } set[] = {{PROTO_TRAIN_OPT_data_dir, td_path("d.csv")},
               {PROTO_TRAIN_OPT_test_data, "t.npz"},
               {PROTO_TRAIN_OPT_test_split, "0.25"},
               {PROTO_TRAIN_OPT_labels, "y.npy"},
               {PROTO_TRAIN_OPT_test_labels, "ty.npy"},
               {PROTO_TRAIN_OPT_x_key, "images"},
               {PROTO_TRAIN_OPT_y_key, "classes"},
               {PROTO_TRAIN_OPT_label, "species"},
               {PROTO_TRAIN_OPT_normalize, "minmax"}};
    for (size_t i = 0; i < sizeof set / sizeof *set; i++)
        cr_assert_null(proto_train_spec_set(&sp, set[i].opt, set[i].arg), "%s", set[i].arg);
    cr_expect_str_eq(proto_train_spec_set(&sp, PROTO_TRAIN_OPT_normalize, "loud"),
                     "standard, minmax or none");
    cr_expect_not_null(proto_train_spec_set(&sp, PROTO_TRAIN_OPT_test_split, "1.5"));
    proto_train_spec_set(&sp, PROTO_TRAIN_OPT_normalize, "minmax");
    proto_train_spec_set(&sp, PROTO_TRAIN_OPT_test_split, "0.25");

    proto_train_begin_run run = {.session = 1, .submitter = "test"};
    proto_bytes packed;
    cr_assert_eq(proto_train_begin_pack(&sp, false, &run, &packed), 0);
    proto_train_begin *m = NULL;
    cr_assert_eq(proto_train_begin_unpack(packed.data, packed.len, &m), 0);
    proto_train_spec got = m->spec;
    rt_data_source s;
    cr_expect(rt_data_source_from_spec(&got, &s), "--data names a file");
    cr_expect_str_eq(s.path, td_path("d.csv"));
    cr_expect_str_eq(s.test_path, "t.npz");
    cr_expect_str_eq(s.labels, "y.npy");
    cr_expect_str_eq(s.test_labels, "ty.npy");
    cr_expect_str_eq(s.x_key, "images");
    cr_expect_str_eq(s.y_key, "classes");
    cr_expect_str_eq(s.label, "species");
    cr_expect_str_eq(s.normalize, "minmax");
    cr_expect_float_eq(s.test_split, 0.25, 1e-7);
    proto_train_begin_free(m);
    proto_bytes_fini(&packed);
}
