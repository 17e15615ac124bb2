/* bench/data — a training run from an .npz against the same run from IDX:
 * Fashion-MNIST's files as Debian ships them (gzip IDX, read into memory)
 * and the same arrays as uint8 members of an .npz stored by zip (read in
 * place: converted, normalised and gathered by the loader from a
 * mapping, in its block shuffle), each normalised the same way from its
 * data, trained by ferry's trainer in this process on one BLAS thread. The
 * rounds alternate which goes first; each side's median epoch is printed,
 * and the median of the rounds' ratios against its target (within 3%). */
#include "data_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zip.h>

#include "runtime/data/data_int.h"
#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"
#include "stats.h"

#define ROUNDS_MAX 8

uint8_t *bench_npy(const char *descr, const uint64_t *dims, int ndims, const void *data,
                   size_t len, size_t *out_len)
{
    char shape[96] = "";
    for (int i = 0, at = 0; i < ndims && i < 3; i++)
        at += snprintf(shape + at, sizeof shape - (size_t)at, "%llu, ",
                       (unsigned long long)dims[i]);
    char dict[160];
    int w = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     descr, shape);
    size_t total = (10 + (size_t)w + 1 + 63) / 64 * 64;
    uint8_t *b = malloc(total + len);
    if (!b)
        bench_die("no memory");
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(total - 10);
    b[9] = (uint8_t)((total - 10) >> 8);
    memset(b + 10, ' ', total - 10);
    memcpy(b + 10, dict, (size_t)w);
    b[total - 1] = '\n';
    memcpy(b + total, data, len);
    *out_len = total + len;
    return b;
}

/* Fashion-MNIST's split `which` ("train", "t10k") as an .npz at path, its
 * members stored. */
static void write_npz(const char *which, const char *path)
{
    char ip[512], lp[512], err[512];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", RT_FMNIST_DIR, which);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", RT_FMNIST_DIR, which);
    rt_idx img, lab;
    if (rt_idx_read(ip, &img, err, sizeof err) || rt_idx_read(lp, &lab, err, sizeof err))
        bench_die("%s", err);
    size_t xl, yl;
    uint64_t xd[] = {img.dims[0], img.dims[1], img.dims[2]}, yd[] = {lab.dims[0]};
    uint8_t *xb = bench_npy("|u1", xd, 3, img.data, img.len, &xl);
    uint8_t *yb = bench_npy("|u1", yd, 1, lab.data, lab.len, &yl);
    int zerr = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    const char *names[] = {"x.npy", "y.npy"};
    uint8_t *bytes[] = {xb, yb};
    size_t lens[] = {xl, yl};
    for (int i = 0; z && i < 2; i++) {
        zip_source_t *s = zip_source_buffer(z, bytes[i], lens[i], 0);
        zip_int64_t at = s ? zip_file_add(z, names[i], s, ZIP_FL_OVERWRITE) : -1;
        if (at < 0 || zip_set_file_compression(z, (zip_uint64_t)at, ZIP_CM_STORE, 0) != 0)
            bench_die("%s: cannot add %s", path, names[i]);
    }
    if (!z || zip_close(z) != 0)
        bench_die("%s: cannot write the zip", path);
    free(xb);
    free(yb);
    rt_idx_free(&img);
    rt_idx_free(&lab);
}

/* One epoch of the mlp on the sets `s` names: the epoch's samples/s. */
static double one_epoch(const ferry_model_t *m, ferry_device_t *dev, const rt_data_source *s,
                        bool *mapped)
{
    char err[512] = "";
    rt_dataset tr, te;
    if (rt_data_source_load(s, NULL, &tr, &te, err, sizeof err))
        bench_die("%s", err);
    *mapped = tr.mapped != NULL;
    rt_train_opts o = {.batch = 128,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                       .seed = 1,
                       .epochs = 1,
                       .train_set = &tr,
                       .test_set = &te};
    rt_trainer *t;
    if (rt_trainer_create(m, dev, &o, &t, err, sizeof err))
        bench_die("cannot create the trainer: %s", err);
    rt_epoch_stats st;
    if (rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err))
        bench_die("epoch: %s", err);
    rt_trainer_destroy(t);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    return st.samples_per_s;
}

int bench_data_train(const char *dir, const char *mlp_so, bool quick)
{
    char ti[512], tl[512], vi[512], vl[512], npz[2][4096], err[512] = "";
    snprintf(ti, sizeof ti, "%s/train-images-idx3-ubyte.gz", RT_FMNIST_DIR);
    snprintf(tl, sizeof tl, "%s/train-labels-idx1-ubyte.gz", RT_FMNIST_DIR);
    snprintf(vi, sizeof vi, "%s/t10k-images-idx3-ubyte.gz", RT_FMNIST_DIR);
    snprintf(vl, sizeof vl, "%s/t10k-labels-idx1-ubyte.gz", RT_FMNIST_DIR);
    if (!rt_data_is_file(ti)) {
        bench_emit("npz_over_idx_train", NAN, "ratio", NULL,
                   "\"skipped\":\"dataset-fashion-mnist is not installed\"");
        return 0;
    }
    snprintf(npz[0], sizeof npz[0], "%s/train.npz", dir);
    snprintf(npz[1], sizeof npz[1], "%s/test.npz", dir);
    write_npz("train", npz[0]);
    write_npz("t10k", npz[1]);
    rt_data_source idx = {.path = ti, .labels = tl, .test_path = vi, .test_labels = vl};
    rt_data_source zipped = {.path = npz[0], .test_path = npz[1]};

    rt_module mod;
    if (rt_module_open(&mod, mlp_so, mlp_so, err, sizeof err) || !mod.task->model)
        bench_die("%s (build it first)", err[0] ? err : "no model");
    ferry_device_t *dev;
    if (rt_device_open("cpu", &dev, err, sizeof err))
        bench_die("%s", err);
    int rounds = quick ? 2 : 5;
    double r_idx[ROUNDS_MAX], r_npz[ROUNDS_MAX], ratio[ROUNDS_MAX];
    for (int r = 0; r < rounds; r++) {
        bool mapped[2];
        for (int k = 0; k < 2; k++) { /* alternate which goes first */
            bool npz_now = (k == 0) == (r % 2 == 1);
            double v = one_epoch(mod.task->model, dev, npz_now ? &zipped : &idx,
                                 &mapped[npz_now]);
            *(npz_now ? &r_npz[r] : &r_idx[r]) = v;
        }
        if (mapped[0] || !mapped[1])
            bench_die("the IDX set should be in memory and the .npz read in place");
        ratio[r] = r_npz[r] / r_idx[r];
        bench_log("  round %d: IDX %.0f samples/s, .npz %.0f samples/s (%.3f)", r + 1,
                  r_idx[r], r_npz[r], ratio[r]);
    }
    rt_device_close(dev);
    rt_module_close(&mod);
    bench_summary si = bench_summarize(r_idx, (size_t)rounds);
    bench_summary sn = bench_summarize(r_npz, (size_t)rounds);
    bench_summary sr = bench_summarize(ratio, (size_t)rounds);
    bench_emit("train_idx_samples_per_s", si.median, "samples/s", &si,
               "\"model\":\"mlp\",\"batch\":128,\"threads\":1,\"data\":\"IDX, in memory\"");
    bench_emit("train_npz_samples_per_s", sn.median, "samples/s", &sn,
               "\"model\":\"mlp\",\"batch\":128,\"threads\":1,"
               "\"data\":\".npz, stored, read in place\"");
    bench_emit("npz_over_idx_train", sr.median, "ratio", &sr, "\"target_min\":0.97");
    return sr.median >= 0.97 ? 0 : 1;
}
