/* tests/runtime — a module built before ferry_model_t grew its metrics
 * member still loads and trains: its descriptor is checked for the bytes
 * its size says, no more, and it has no metrics. */
#include "rth.h"

#include "runtime/device/device.h"
#include "runtime/train/train.h"

TestSuite(rt_oldmodel, .init = rth_setup_dir, .fini = rth_teardown, .timeout = 60);

RTH_TEST(rt_oldmodel, a_model_descriptor_of_the_first_size_loads)
{
    rt_module m;
    char err[512] = "";
    int rc = rt_module_open(&m, rth_module("oldmodel.so"), "oldmodel.so", err, sizeof err);
    cr_assert(rc == 0, "%s", err);
    cr_assert_eq(m.task->model->size, FERRY_MODEL_SIZE_V1);
    ferry_device_t *dev;
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "%s", err);
    rt_model_ctx mc;
    rc = rt_model_ctx_init(&mc, m.task->model, dev, 8, 1, err, sizeof err);
    cr_assert(rc == 0, "a model of the first size is refused: %s", err);
    cr_assert(rt_model_metrics(m.task->model) == NULL);
    rt_model_ctx_free(&mc);
    rt_device_close(dev);
    rt_module_close(&m);
}
