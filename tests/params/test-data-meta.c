/* tests/params — how a run saw its data, kept in a saved file's metadata
 * (cluster/params/data_meta.c): what rank 0's begin reply says reads back
 * the same into a prediction's request, floats bit for bit; a file saved
 * without it reads as such; metadata that is not what its key holds is
 * refused, naming the file and the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <ferry/ferry.h>

#include "cluster/params/params.h"
#include "proto/proto.h"

static char dir[64];
static char path[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/ferry-dmeta-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.safetensors", dir);
}

static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

TestSuite(data_meta, .init = setup, .fini = teardown);

static const char *const names[] = {"fc.weight"};
static const uint32_t shapes[] = {2, 3, 0, 0};
static const float values[] = {1, 2, 3, 4, 5, 6};

static void save(const params_meta *meta, size_t n)
{
    cluster_tensors t = {1, names, shapes, values, 6};
    char err[512] = "";
    cr_assert_eq(params_save(path, &t, meta, n, err, sizeof err), 0, "%s", err);
}

/* Reads the file back into q; returns params_data_read's code. */
static int read_back(params_file *f, proto_predict_req *q, void **owned, char *err,
                     size_t errlen)
{
    char lerr[512] = "";
    cr_assert_eq(params_load(path, f, lerr, sizeof lerr), 0, "%s", lerr);
    memset(q, 0, sizeof *q);
    return params_data_read(f, path, q, owned, err, errlen);
}

Test(data_meta, what_the_begin_says_reads_back_the_same)
{
    float shift[2] = {0.1f, 123.456789f}, scale[2] = {3.0e-7f, 1.0f / 3.0f};
    char *classes[3] = {"a b", "c,\"d\"", "\xc3\xa9t\xc3\xa9"};
    uint32_t input[3] = {1, 1, 2};
    proto_train_begin_reply b = {.normalize = "minmax",
                                 .n_norm_shift = 2,
                                 .norm_shift = shift,
                                 .n_norm_scale = 2,
                                 .norm_scale = scale,
                                 .n_class_names = 3,
                                 .class_names = classes,
                                 .n_input = 3,
                                 .input = input,
                                 .outputs = 3};
    params_meta meta[1 + PARAMS_DATA_META] = {{"data", "what the run read"}};
    char *text[PARAMS_DATA_META];
    cr_assert_eq(params_data_meta(&b, meta + 1, text), PARAMS_DATA_META);
    save(meta, 1 + PARAMS_DATA_META);
    params_data_meta_free(text);

    params_file f;
    proto_predict_req q;
    void *owned = NULL;
    char err[512] = "";
    cr_assert_eq(read_back(&f, &q, &owned, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(q.normalize, "minmax");
    cr_assert_str_eq(q.data, "what the run read");
    cr_assert_eq(q.n_norm_shift, 2);
    cr_assert_eq(q.n_norm_scale, 2);
    cr_assert(memcmp(q.norm_shift, shift, sizeof shift) == 0, "shift %.9g %.9g",
              q.norm_shift[0], q.norm_shift[1]);
    cr_assert(memcmp(q.norm_scale, scale, sizeof scale) == 0, "scale %.9g %.9g",
              q.norm_scale[0], q.norm_scale[1]);
    cr_assert_eq(q.n_class_names, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(q.class_names[i], classes[i]);
    cr_assert_eq(q.n_input, 3);
    cr_assert(q.input[0] == 1 && q.input[1] == 1 && q.input[2] == 2);
    cr_assert_eq(q.outputs, 3);
    free(owned);
    params_file_free(&f);
}

Test(data_meta, a_file_saved_without_it_reads_as_such)
{
    proto_train_begin_reply b = {.normalize = ""};
    params_meta meta[1 + PARAMS_DATA_META] = {{"data", "x"}};
    char *text[PARAMS_DATA_META];
    cr_assert_eq(params_data_meta(&b, meta + 1, text), 0);
    cr_assert_eq(params_data_meta(NULL, meta + 1, text), 0);
    save(meta, 1);
    params_file f;
    proto_predict_req q;
    void *owned = NULL;
    char err[512] = "";
    cr_assert_eq(read_back(&f, &q, &owned, err, sizeof err), 0, "%s", err);
    cr_assert_null(q.normalize);
    cr_assert_null(owned);
    cr_assert_str_eq(q.data, "x");
    params_file_free(&f);
}

static void refused(const params_meta *meta, size_t n, const char *want)
{
    save(meta, n);
    params_file f;
    proto_predict_req q;
    void *owned = NULL;
    char err[512] = "";
    cr_assert_eq(read_back(&f, &q, &owned, err, sizeof err), FERRY_ECORRUPT);
    cr_assert_null(owned);
    cr_assert(strstr(err, path) && strstr(err, want), "%s", err);
    params_file_free(&f);
}

Test(data_meta, metadata_that_is_not_a_list_is_refused_by_key)
{
    params_meta meta[] = {{"normalize", "standard"},  {"norm_shift", "[1]"},
                          {"norm_scale", "not json"}, {"class_names", "[]"},
                          {"input", "[1,1,1]"},       {"outputs", "2"}};
    refused(meta, 6, "its metadata \"norm_scale\" is another text, not a JSON list");
    refused(meta, 1, "its metadata \"norm_shift\" is missing, not a JSON list");
}

Test(data_meta, lists_that_disagree_are_refused_with_their_sizes)
{
    params_meta meta[] = {{"normalize", "standard"}, {"norm_shift", "[1, 2]"},
                          {"norm_scale", "[1]"},     {"class_names", "[]"},
                          {"input", "[1,1,2]"},      {"outputs", "many"}};
    refused(meta, 6,
            "its metadata says 2 shifts, 1 scales, a shape of 3 numbers and "
            "many outputs");
}
