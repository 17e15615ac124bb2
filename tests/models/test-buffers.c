/* A model's buffers as rt_model_ctx_init makes them: allocated on the
 * device from the model's init_buffers (zeros without one), absent for a
 * model without (and for a descriptor built before the member, whatever
 * lies past its size), and refused with a reason when a buffer's shape is
 * wrong or its init fails. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "tmodels.h"

static const ferry_param_t two[] = {{"stat.mean", {3}}, {"stat.count", {0}}, {NULL, {0}}};

static int init_ones(ferry_model_ctx_t *mc, float *b)
{
    (void)mc;
    for (int i = 0; i < 3; i++)
        b[i] = 1.5f;
    b[16] = 7; /* the scalar, on its 16-float boundary */
    return 0;
}

static int init_fails(ferry_model_ctx_t *mc, float *b)
{
    (void)mc;
    (void)b;
    return FERRY_EIO;
}

static int ctx(const ferry_model_t *m, ferry_device_t *dev, rt_model_ctx *mc, char *err)
{
    return rt_model_ctx_init(mc, m, dev, 4, 1, err, 256);
}

Test(models_buffers,
     buffers_come_from_init_buffers_or_are_zero_and_old_descriptors_have_none)
{
    tmodel t;
    tm_open(&t, "mlp", 4, 1);
    cr_expect_eq(t.mc.blen, 0, "the mlp has no buffers");
    cr_expect_null(t.mc.pub.buffers);
    ferry_model_t m = *t.m;
    m.buffers = two;
    m.init_buffers = init_ones;
    rt_model_ctx mc;
    char err[256] = "";
    cr_assert_eq(ctx(&m, t.dev, &mc, err), 0, "%s", err);
    cr_assert_eq(mc.blen, 32, "two tensors on 16-float boundaries");
    cr_assert_eq(ferry_model_buffers(&mc.pub), mc.pub.buffers);
    float host[32];
    cr_assert_eq(rt_model_ctx_get_buffers(&mc, host), 0);
    cr_expect(host[0] == 1.5f && host[2] == 1.5f && host[16] == 7,
              "init_buffers' values are on the device");
    rt_model_ctx_free(&mc);

    m.init_buffers = NULL;
    cr_assert_eq(ctx(&m, t.dev, &mc, err), 0, "%s", err);
    cr_assert_eq(rt_model_ctx_get_buffers(&mc, host), 0);
    cr_expect(host[0] == 0 && host[16] == 0, "without init_buffers they are zero");
    rt_model_ctx_free(&mc);

    /* Built before `buffers`: what lies past its size is not read. */
    m.size = (uint32_t)FERRY_MODEL_SIZE_V3;
    m.buffers = (const ferry_param_t *)(uintptr_t)0x10;
    m.init_buffers = init_fails;
    cr_assert_eq(ctx(&m, t.dev, &mc, err), 0, "%s", err);
    cr_expect_eq(mc.blen, 0);
    cr_expect_null(mc.pub.buffers);
    rt_model_ctx_free(&mc);
    tm_close(&t);
    tcom_assert_no_leaks();
}

Test(models_buffers, a_buffer_of_a_bad_shape_or_a_failing_init_is_refused_with_a_reason)
{
    tmodel t;
    tm_open(&t, "mlp", 4, 1);
    ferry_model_t m = *t.m;
    static const ferry_param_t bad[] = {{"stat.mean", {-1}}, {NULL, {0}}};
    m.buffers = bad;
    rt_model_ctx mc;
    char err[256] = "";
    cr_expect_eq(ctx(&m, t.dev, &mc, err), FERRY_EINVAL);
    cr_expect(strstr(err, "buffer stat.mean"), "%s", err);
    static const ferry_param_t huge[] = {{"stat.mean", {1 << 24, 1 << 24, 1 << 24}},
                                         {NULL, {0}}};
    m.buffers = huge;
    cr_expect_eq(ctx(&m, t.dev, &mc, err), FERRY_EINVAL);
    cr_expect(strstr(err, "buffer stat.mean is too large"), "%s", err);
    m.buffers = two;
    m.init_buffers = init_fails;
    cr_expect_eq(ctx(&m, t.dev, &mc, err), FERRY_EIO);
    cr_expect(strstr(err, "the model's init_buffers failed"), "%s", err);
    tm_close(&t);
    tcom_assert_no_leaks();
}
