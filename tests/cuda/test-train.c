/* Training through rt_trainer on a GPU: a set held on the device (batches
 * gathered there) and a set staged through pinned buffers (over the
 * budget) give the same bits as batches uploaded from the host; the gather kernel agrees
 * with the cpu's row copy; tf32 trains. And on the cpu (in CI): --precision tf32 and bf16
 * are refused with a clear error. The models are the bundled mlp and cnn
 * (FERRY_TEST_TASKS). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "runtime/runtime.h"
#include "runtime/train/train.h"
#include "tcommon.h"
#include "tcuda.h"

static void open_model(rt_module *mod, const char *name)
{
    const char *dir = getenv("FERRY_TEST_TASKS");
    cr_assert(dir && dir[0], "FERRY_TEST_TASKS is not set (run through meson test)");
    char path[4096], file[64], err[512] = "";
    snprintf(file, sizeof file, "%s.so", name);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = rt_module_open(mod, path, file, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", path, err);
    cr_assert_not_null(mod->task->model);
}

/* n Fashion-MNIST-shaped samples with labels in [0, 10) from `seed`. */
static rt_dataset random_set(size_t n, uint64_t seed)
{
    rt_dataset ds = {.n = n, .features = 784, .c = 1, .h = 28, .w = 28, .classes = 10};
    double *x = tc_new(n * 784);
    tc_rand(x, n * 784, -1, 1, &seed);
    ds.x = malloc(n * 784 * sizeof(float));
    ds.labels = malloc(n * sizeof(int32_t));
    cr_assert(ds.x && ds.labels);
    for (size_t i = 0; i < n * 784; i++)
        ds.x[i] = (float)x[i];
    for (size_t i = 0; i < n; i++)
        ds.labels[i] = (int32_t)((uint64_t)(x[i * 784] * 1e6 + 1e6) % 10);
    free(x);
    return ds;
}

/* Steps the last train() ran as replayed graphs. */
static size_t graph_steps;

/* Trains `model` on `dev` for 2 epochs of 1000 samples at batch 128 (the
 * last batch short) and returns its parameters (malloc'ed, *len floats). */
static float *train(ferry_device_t *dev, const ferry_model_t *model, bool host_batches,
                    rt_precision prec, size_t *len)
{
    rt_dataset tr = random_set(1000, 5), te = random_set(300, 6);
    rt_train_opts o = {.batch = 128,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                       .seed = 3,
                       .train_set = &tr,
                       .test_set = &te,
                       .precision = prec,
                       .host_batches = host_batches};
    rt_trainer *t = NULL;
    char err[512] = "";
    int rc = rt_trainer_create(model, dev, &o, &t, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", dev->name, err);
    graph_steps = 0;
    for (int e = 0; e < 2; e++) {
        rt_epoch_stats st;
        rc = rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err);
        cr_assert_eq(rc, 0, "%s: %s", dev->name, err);
        graph_steps += st.graph_steps;
        cr_assert(isfinite(st.train_loss));
        cr_assert_eq(st.eval_samples, 300);
    }
    *len = rt_trainer_params_len(t);
    float *p = malloc(*len * sizeof *p);
    cr_assert(p);
    cr_assert_eq(rt_trainer_params(t, p), 0);
    rt_trainer_destroy(t);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    return p;
}

Test(cuda_train, sets_held_on_the_gpu_give_the_bits_of_uploaded_batches, .timeout = 600)
{
    tc_gpu();
    const char *names[] = {"mlp", "cnn"};
    for (int m = 0; m < 2; m++) {
        rt_module mod;
        open_model(&mod, names[m]);
        size_t n1, n2, n3;
        float *held = train(G, mod.task->model, false, RT_PREC_FP32, &n1);
        float *again = train(G, mod.task->model, false, RT_PREC_FP32, &n2);
        float *uploaded = train(G, mod.task->model, true, RT_PREC_FP32, &n3);
        cr_assert(n1 == n2 && n1 == n3);
        cr_assert_eq(memcmp(held, again, n1 * sizeof(float)), 0,
                     "%s: two runs with the same seed differ", names[m]);
        cr_assert_eq(memcmp(held, uploaded, n1 * sizeof(float)), 0,
                     "%s: the set held on the GPU changed the training", names[m]);
        free(held);
        free(again);
        free(uploaded);
        rt_module_close(&mod);
    }
    tc_finish();
}

/* A set over the device's budget (FERRY_DEVSET_MAX_BYTES=0 puts every set
 * over it) is staged: pinned buffers, copies on the copy stream. The model
 * sees the same bytes, so the parameters are those of the set held on the
 * device, bit for bit. */
Test(cuda_train, staged_sets_give_the_bits_of_sets_held_on_the_gpu, .timeout = 600)
{
    tc_gpu();
    const char *names[] = {"mlp", "cnn"};
    for (int m = 0; m < 2; m++) {
        rt_module mod;
        open_model(&mod, names[m]);
        size_t n1, n2;
        float *held = train(G, mod.task->model, false, RT_PREC_FP32, &n1);
        /* Criterion forks each test: the variable stays in this one. */
        setenv(RT_DEVSET_LIMIT_ENV, "0", 1);
        float *staged = train(G, mod.task->model, false, RT_PREC_FP32, &n2);
        unsetenv(RT_DEVSET_LIMIT_ENV);
        cr_assert_eq(n1, n2);
        cr_assert_eq(memcmp(held, staged, n1 * sizeof(float)), 0,
                     "%s: staging the set changed the training", names[m]);
        free(held);
        free(staged);
        rt_module_close(&mod);
    }
    tc_finish();
}

/* The stager on a GPU copies on its copy stream (the cpu uploads: see
 * tests/data), and each batch read back is the host loader's. */
Test(cuda_train, the_stager_copies_on_the_copy_stream_the_batches_the_host_gathers)
{
    tc_gpu();
    rt_dataset ds = random_set(777, 4);
    rt_stager *s = NULL;
    char err[256] = "";
    cr_assert_eq(rt_stager_create(G, &ds, 100, &s, err, sizeof err), 0, "%s", err);
    cr_assert(rt_stager_async(s), "no copy stream on %s", G->name);
    rt_loader_opts o = {.batch = 100, .world = 1, .seed = 8, .shuffle = true};
    rt_loader *plain = NULL, *staged = NULL;
    cr_assert_eq(rt_loader_create(&ds, &o, &plain), 0);
    rt_stager_loader_opts(s, &o);
    cr_assert_eq(rt_loader_create(&ds, &o, &staged), 0);
    float *hx = malloc(100 * 784 * sizeof(float));
    int32_t hl[100];
    cr_assert(hx);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(rt_loader_begin(plain, e), 0);
        cr_assert_eq(rt_loader_begin(staged, e), 0);
        const rt_batch_host *a;
        while ((a = rt_loader_next(plain))) {
            const rt_batch_host *h = rt_loader_next(staged);
            ferry_batch_t b;
            cr_assert_eq(rt_stager_batch(s, h, &b), 0);
            /* Some work on the compute stream that reads the batch. */
            G->ops->relu(G, (float *)b.x, b.x, (size_t)b.n * 784);
            size_t n = (size_t)a->n;
            cr_assert_eq(G->ops->download(G, hx, b.x, n * 784 * sizeof(float)), 0);
            cr_assert_eq(G->ops->download(G, hl, b.labels, n * sizeof(int32_t)), 0);
            for (size_t i = 0; i < n * 784; i++)
                cr_assert_eq(hx[i], a->x[i] > 0 ? a->x[i] : 0.0f, "[%zu]", i);
            cr_assert_eq(memcmp(hl, a->labels, n * sizeof(int32_t)), 0);
        }
    }
    free(hx);
    rt_loader_destroy(plain);
    rt_loader_destroy(staged);
    rt_stager_destroy(s);
    rt_dataset_free(&ds);
    tc_finish();
}

/* A step replayed from a CUDA graph runs the kernels, with the arguments,
 * that the uncaptured step runs: the parameters are the same bits with
 * FERRY_CUDA_GRAPHS=0 and without, held or staged. 1000 samples at batch
 * 128 make 7 full steps and a short one an epoch: the first full step runs
 * uncaptured, the second is captured, the rest replay. */
Test(cuda_train, steps_replayed_from_graphs_give_the_bits_of_uncaptured_steps,
     .timeout = 600)
{
    tc_gpu();
    const char *names[] = {"mlp", "cnn"};
    for (int m = 0; m < 2; m++) {
        rt_module mod;
        open_model(&mod, names[m]);
        size_t n1, n2, n3;
        setenv(RT_GRAPHS_ENV, "0", 1);
        float *plain = train(G, mod.task->model, false, RT_PREC_FP32, &n1);
        cr_assert_eq(graph_steps, 0, "%s=0 left graphs on", RT_GRAPHS_ENV);
        unsetenv(RT_GRAPHS_ENV);
        float *graphs = train(G, mod.task->model, false, RT_PREC_FP32, &n2);
        cr_assert_geq(graph_steps, 8, "%s: %zu steps of 14 replayed", names[m],
                      graph_steps);
        setenv(RT_DEVSET_LIMIT_ENV, "0", 1);
        float *staged = train(G, mod.task->model, false, RT_PREC_FP32, &n3);
        unsetenv(RT_DEVSET_LIMIT_ENV);
        cr_assert_geq(graph_steps, 8, "%s staged: %zu steps of 14 replayed", names[m],
                      graph_steps);
        cr_assert(n1 == n2 && n1 == n3);
        cr_assert_eq(memcmp(plain, graphs, n1 * sizeof(float)), 0,
                     "%s: graphs changed the training", names[m]);
        cr_assert_eq(memcmp(plain, staged, n1 * sizeof(float)), 0,
                     "%s: graphs over staged batches changed the training", names[m]);
        free(plain);
        free(graphs);
        free(staged);
        rt_module_close(&mod);
    }
    tc_finish();
}

Test(cuda_train, tf32_trains_close_to_fp32, .timeout = 600)
{
    tc_gpu();
    rt_module mod;
    open_model(&mod, "cnn");
    size_t n1, n2;
    float *fp32 = train(G, mod.task->model, false, RT_PREC_FP32, &n1);
    float *tf32 = train(G, mod.task->model, false, RT_PREC_TF32, &n2);
    double *a = tc_new(n1), *b = tc_new(n1);
    for (size_t i = 0; i < n1; i++) {
        a[i] = fp32[i];
        b[i] = tf32[i];
    }
    /* TF32 rounds products' inputs to 10 mantissa bits: 2 epochs stay near
     * the fp32 run, not on it. */
    tc_close(b, a, n1, 0.05, "cnn parameters, tf32 against fp32");
    free(a);
    free(b);
    free(fp32);
    free(tf32);
    rt_module_close(&mod);
    tc_finish();
}

/* bf16 (products and convolutions on bfloat16 inputs, float32 master
 * weights and optimizer state) trains: the same seed gives the same bits,
 * the parameters move off the fp32 run's (bf16 is on), and stay near them
 * after 2 epochs (0.25 of the largest: bfloat16 keeps 8 bits, and the
 * random labels give rounding room to grow). The accuracy targets are
 * tests/gpu's. */
Test(cuda_train, bf16_trains_near_fp32_with_the_same_bits_for_a_seed, .timeout = 600)
{
    tc_gpu();
    const char *names[] = {"mlp", "cnn"};
    for (int m = 0; m < 2; m++) {
        rt_module mod;
        open_model(&mod, names[m]);
        size_t n1, n2, n3;
        float *fp32 = train(G, mod.task->model, false, RT_PREC_FP32, &n1);
        float *a = train(G, mod.task->model, false, RT_PREC_BF16, &n2);
        float *b = train(G, mod.task->model, false, RT_PREC_BF16, &n3);
        cr_assert(n1 == n2 && n1 == n3);
        cr_assert_eq(memcmp(a, b, n1 * sizeof(float)), 0, "%s: two bf16 runs differ",
                     names[m]);
        cr_assert_neq(memcmp(a, fp32, n1 * sizeof(float)), 0,
                      "%s: bf16 gave fp32's bits: not in effect", names[m]);
        double *da = tc_new(n1), *df = tc_new(n1);
        for (size_t i = 0; i < n1; i++) {
            da[i] = a[i];
            df[i] = fp32[i];
        }
        tc_close(da, df, n1, 0.25, names[m]);
        free(da);
        free(df);
        free(fp32);
        free(a);
        free(b);
        rt_module_close(&mod);
    }
    tc_finish();
}

Test(cuda_train, the_gather_kernel_copies_the_rows_the_cpu_copies)
{
    tc_gpu();
    tc_cpu();
    const size_t rows = 1000, words = 784, picks = 333;
    double *h = tc_new(rows * words);
    uint64_t seed = 9;
    tc_rand(h, rows * words, -5, 5, &seed);
    float *gs = tc_put(G, h, rows * words), *cs = tc_put(C, h, rows * words);
    uint32_t idx[333];
    for (size_t i = 0; i < picks; i++)
        idx[i] = (uint32_t)((i * 7919 + 13) % rows);
    uint32_t *gi = G->ops->alloc(G, sizeof idx);
    cr_assert_eq(G->ops->upload(G, gi, idx, sizeof idx), 0);
    float *gd = G->ops->alloc(G, picks * words * sizeof(float));
    float *cd = C->ops->alloc(C, picks * words * sizeof(float));
    const rt_device_ext_t *ge = rt_device_ext(G), *ce = rt_device_ext(C);
    cr_assert_eq(ge->gather(G, gd, gs, gi, picks, words * sizeof(float)), 0);
    cr_assert_eq(ce->gather(C, cd, cs, idx, picks, words * sizeof(float)), 0);
    cr_assert_eq(ge->gather(G, gd, gs, gi, picks, 6), FERRY_EINVAL);
    double *got = tc_new(picks * words), *want = tc_new(picks * words);
    tc_get(G, got, gd, picks * words);
    tc_get(C, want, cd, picks * words);
    tc_close(got, want, picks * words, 0, "gather");
    size_t free_b = 0, total_b = 0;
    cr_assert_eq(ge->mem_info(G, &free_b, &total_b), 0);
    cr_assert(free_b > 0 && free_b <= total_b);
    G->ops->free(G, gs);
    G->ops->free(G, gi);
    G->ops->free(G, gd);
    C->ops->free(C, cs);
    C->ops->free(C, cd);
    free(h);
    free(got);
    free(want);
    tc_finish();
}

Test(cpu_precision, the_cpu_refuses_tf32_and_bf16_with_a_clear_error)
{
    tc_cpu();
    rt_module mod;
    open_model(&mod, "mlp");
    rt_dataset tr = random_set(64, 1), te = random_set(32, 2);
    const rt_precision bad[] = {RT_PREC_TF32, RT_PREC_BF16};
    for (int i = 0; i < 2; i++) {
        rt_train_opts o = {.batch = 32,
                           .optim = {.kind = RT_OPT_SGD, .lr = 0.05f},
                           .seed = 1,
                           .train_set = &tr,
                           .test_set = &te,
                           .precision = bad[i]};
        rt_trainer *t = (rt_trainer *)1;
        char err[512] = "";
        int rc = rt_trainer_create(mod.task->model, C, &o, &t, err, sizeof err);
        cr_assert_eq(rc, FERRY_ENOTSUP, "%s: %d %s", rt_precision_name(bad[i]), rc, err);
        cr_assert_null(t);
        cr_assert(strstr(err, rt_precision_name(bad[i])) && strstr(err, "float32 only") &&
                      strstr(err, "cpu"),
                  "not a clear error: '%s'", err);
    }
    /* fp32, the default, trains. */
    rt_train_opts o = {.batch = 32,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f},
                       .seed = 1,
                       .train_set = &tr,
                       .test_set = &te};
    rt_trainer *t = NULL;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(mod.task->model, C, &o, &t, err, sizeof err), 0, "%s",
                 err);
    rt_trainer_destroy(t);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    rt_module_close(&mod);
    tc_finish();
}

Test(cpu_precision, precision_names_parse_and_print)
{
    rt_precision p;
    const char *names[] = {"fp32", "tf32", "bf16"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(rt_precision_parse(names[i], &p), 0);
        cr_assert_eq((int)p, i);
        cr_assert_str_eq(rt_precision_name(p), names[i]);
    }
    cr_assert_eq(rt_precision_parse("fp16", &p), FERRY_EINVAL);
    cr_assert_eq(rt_precision_parse("FP32", &p), FERRY_EINVAL);
    cr_assert_eq(rt_precision_parse(NULL, &p), FERRY_EINVAL);
}
