/* The bundled models' descriptors: what each declares (its data, input,
 * outputs and the architecture its parameter count pins down), that they
 * pass the runtime's checks, and that a copy spoilt in one field fails them
 * with a text that says which. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "tmodels.h"

typedef struct expect {
    const char *name, *dataset;
    int kind, c, h, w, outputs;
    size_t params; /* parameters that count, padding excluded */
} expect;

static const expect models[] = {
    /* 784*256+256 + 256*128+128 + 128*10+10 */
    {"mlp", "fashion-mnist", FERRY_MODEL_CLASSIFIER, 1, 28, 28, 10, 235146},
    /* 16*1*25+16 + 32*16*25+32 + 1568*128+128 + 128*10+10 */
    {"cnn", "fashion-mnist", FERRY_MODEL_CLASSIFIER, 1, 28, 28, 10, 215370},
    {"linreg", "linear", FERRY_MODEL_REGRESSOR, 1, 1, 8, 1, 9},
};

Test(models_descriptor, each_model_declares_its_data_shapes_and_size)
{
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        const expect *e = &models[k];
        tmodel t;
        tm_open(&t, e->name, 4, 1); /* rt_model_ctx_init's checks pass in here */
        cr_expect_str_eq(t.mod.task->name, e->name);
        cr_expect_str_eq(t.m->dataset, e->dataset, "%s", e->name);
        cr_expect_eq(t.m->kind, e->kind, "%s", e->name);
        cr_expect(t.m->input[0] == e->c && t.m->input[1] == e->h && t.m->input[2] == e->w,
                  "%s: input {%d, %d, %d}", e->name, t.m->input[0], t.m->input[1],
                  t.m->input[2]);
        cr_expect_eq(t.m->outputs, e->outputs, "%s", e->name);
        cr_expect_eq(rt_model_param_count(t.m), e->params, "%s: %zu parameters", e->name,
                     rt_model_param_count(t.m));
        /* Workspace grows with the batch, and is there for a batch of one. */
        cr_expect_gt(t.m->workspace(1), 0);
        cr_expect_gt(t.m->workspace(64), t.m->workspace(1));
        tm_close(&t);
    }
    tcom_assert_no_leaks();
}

/* rt_model_ctx_init on `m`, expected to fail with a text holding `what`. */
static void refused(const ferry_model_t *m, ferry_device_t *dev, const char *case_,
                    const char *what)
{
    rt_model_ctx mc;
    char err[256] = "";
    int rc = rt_model_ctx_init(&mc, m, dev, 8, 1, err, sizeof err);
    cr_expect_eq(rc, FERRY_EINVAL, "%s: accepted (%d)", case_, rc);
    cr_expect(strstr(err, what), "%s: \"%s\" does not say \"%s\"", case_, err, what);
    if (rc == 0)
        rt_model_ctx_free(&mc);
}

Test(models_descriptor, a_spoilt_copy_of_a_descriptor_is_refused_with_a_reason)
{
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        tmodel t;
        tm_open(&t, models[k].name, 4, 1);
        const ferry_model_t *m = t.m;
        ferry_model_t bad;

        bad = *m;
        bad.version = FERRY_MODEL_ABI_VERSION + 1;
        refused(&bad, t.dev, "another ABI version", "version");
        bad = *m;
        bad.size = 8;
        refused(&bad, t.dev, "a short descriptor", "bytes");
        bad = *m;
        bad.kind = 0;
        refused(&bad, t.dev, "no kind", "kind");
        bad = *m;
        bad.params = NULL;
        refused(&bad, t.dev, "no parameter list", "no parameters");
        static const ferry_param_t none[] = {{NULL, {0}}};
        bad.params = none;
        refused(&bad, t.dev, "an empty parameter list", "no parameters");
        bad = *m;
        bad.input[1] = 0;
        refused(&bad, t.dev, "an input of zero rows", "input");
        bad = *m;
        bad.outputs = 0;
        refused(&bad, t.dev, "no outputs", "outputs");
        bad = *m;
        bad.loss_grad = NULL;
        refused(&bad, t.dev, "no loss_grad", "loss_grad");

        /* A zero in the last tensor's shape, in a copy of the list. */
        ferry_param_t params[TM_MAX_PARAMS];
        memcpy(params, m->params, (size_t)(t.nparams + 1) * sizeof *params);
        params[t.nparams - 1].shape[0] = 0;
        bad = *m;
        bad.params = params;
        refused(&bad, t.dev, "a tensor of shape 0", params[t.nparams - 1].name);
        tm_close(&t);
    }
    tcom_assert_no_leaks();
}
