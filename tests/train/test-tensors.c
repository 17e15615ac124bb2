/* tests/train — a model's parameters as named tensors: read out of the
 * trainer's flat buffer without its padding, and laid back into it only
 * when every tensor of the model is there by name with its shape (in any
 * order), refused otherwise with the tensor and both shapes named. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <ferry/model.h>

#include "runtime/train/tensors.h"

/* Two tensors whose flat layout has padding: 3x2 (6 floats, padded to 16)
 * and 5. */
static const ferry_param_t params[] = {{"a.weight", {3, 2}}, {"a.bias", {5}}, {NULL}};
static const ferry_model_t model = {FERRY_MODEL_HEADER, .params = params};

static float *flat_counting(void)
{
    size_t len = ferry_model_layout(&model, NULL);
    cr_assert_eq(len, 32);
    float *f = calloc(len, sizeof *f);
    for (size_t i = 0; i < 6; i++)
        f[i] = (float)i;
    for (size_t i = 0; i < 5; i++)
        f[16 + i] = 100.0f + (float)i;
    return f;
}

Test(tensors, the_flat_buffer_reads_out_without_its_padding_and_back)
{
    float *flat = flat_counting();
    rt_tensors t;
    cr_assert_eq(rt_tensors_from_flat(&model, flat, &t), 0);
    cr_assert_eq(t.n, 2);
    cr_assert_str_eq(t.names[1], "a.bias");
    cr_assert_eq(t.shapes[0], 3);
    cr_assert_eq(t.shapes[1], 2);
    cr_assert_eq(t.shapes[4], 5);
    cr_assert_eq(t.floats, 11);
    cr_assert_eq(t.values[5], 5.0f);
    cr_assert_eq(t.values[6], 100.0f);
    float *back = NULL;
    char err[256] = "";
    cr_assert_eq(rt_tensors_to_flat(&model, &t, &back, err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(back, flat, 32 * sizeof *flat), 0,
                 "padding zero, values in place");
    free(back);
    rt_tensors_free(&t);
    free(flat);
}

Test(tensors, tensors_in_another_order_are_matched_by_name)
{
    const char *names[] = {"a.bias", "a.weight"};
    uint32_t shapes[] = {5, 0, 0, 0, 3, 2, 0, 0};
    float values[11] = {100, 101, 102, 103, 104, 0, 1, 2, 3, 4, 5};
    rt_tensors in = {2, names, shapes, values, 11};
    float *flat = NULL, *want = flat_counting();
    char err[256] = "";
    cr_assert_eq(rt_tensors_to_flat(&model, &in, &flat, err, sizeof err), 0, "%s", err);
    cr_assert_eq(memcmp(flat, want, 32 * sizeof *flat), 0);
    free(flat);
    free(want);
}

/* `in` refused with FERRY_EINVAL and `needle` in the message. */
static void refused(const rt_tensors *in, const char *needle)
{
    float *flat = (float *)1;
    char err[256] = "";
    cr_expect_eq(rt_tensors_to_flat(&model, in, &flat, err, sizeof err), FERRY_EINVAL);
    cr_expect_null(flat);
    cr_expect(strstr(err, needle), "'%s' not in: %s", needle, err);
}

Test(tensors, a_shape_that_differs_is_refused_naming_both)
{
    const char *names[] = {"a.weight", "a.bias"};
    uint32_t shapes[] = {2, 3, 0, 0, 5, 0, 0, 0};
    float values[11] = {0};
    refused(&(rt_tensors){2, names, shapes, values, 11},
            "tensor 'a.weight' is 2x3 there and 3x2 in the model");
}

Test(tensors, a_missing_tensor_is_refused_with_the_models_shape)
{
    const char *names[] = {"a.weight"};
    uint32_t shapes[] = {3, 2, 0, 0};
    float values[6] = {0};
    refused(&(rt_tensors){1, names, shapes, values, 6},
            "they have no tensor 'a.bias' (the model's is 5)");
}

Test(tensors, a_tensor_the_model_lacks_is_refused)
{
    const char *names[] = {"a.weight", "a.bias", "b.weight"};
    uint32_t shapes[] = {3, 2, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0};
    float values[12] = {0};
    refused(&(rt_tensors){3, names, shapes, values, 12},
            "tensor 'b.weight' is not one of the model's");
}

Test(tensors, values_that_do_not_add_up_to_the_shapes_are_refused)
{
    const char *names[] = {"a.weight", "a.bias"};
    uint32_t shapes[] = {3, 2, 0, 0, 5, 0, 0, 0};
    float values[12] = {0};
    refused(&(rt_tensors){2, names, shapes, values, 12},
            "12 values given for tensors of 11");
    refused(&(rt_tensors){2, names, shapes, values, 7}, "more than the 7 values given");
}
