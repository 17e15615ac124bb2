/* The fixture of tests/train. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "tshape.h"
#include "ttrain.h"

void ttrain_open(ttrain *t, const char *name)
{
    const char *dir = getenv("FERRY_TEST_TASKS");
    cr_assert(dir, "FERRY_TEST_TASKS is not set (run through meson test)");
    char path[4096], file[256], err[512] = "";
    snprintf(file, sizeof file, "%s.so", name);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = rt_module_open(&t->mod, path, file, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", path, err);
    cr_assert(t->mod.task->model, "%s has no model", file);
    /* Fashion-MNIST's shape, as the sets the tests make have it, before
     * anything reads the tensors (a trainer would give it the set's own). */
    cr_assert_eq(tcom_fmnist_shape(t->mod.task->model), 0, "%s", file);
    rc = rt_device_open("cpu", &t->dev, err, sizeof err);
    cr_assert_eq(rc, 0, "cpu device: %s", err);
}

void ttrain_close(ttrain *t)
{
    rt_device_close(t->dev);
    rt_module_close(&t->mod);
}

void ttrain_random_set(rt_dataset *ds, size_t n, int c, int h, int w, int classes,
                       uint64_t seed)
{
    int features = c * h * w;
    *ds = (rt_dataset){
        .n = n, .features = features, .c = c, .h = h, .w = w, .classes = classes};
    ds->x = malloc(n * (size_t)features * sizeof(float));
    ds->labels = malloc(n * sizeof(int32_t));
    cr_assert(ds->x && ds->labels);
    /* A linear congruential sequence is plenty for test inputs. */
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (size_t i = 0; i < n * (size_t)features; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ds->x[i] = (float)((double)(s >> 40) / 16777216.0 - 0.5);
    }
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ds->labels[i] = (int32_t)((s >> 33) % (uint64_t)classes);
    }
}

void ttrain_free_set(rt_dataset *ds)
{
    free(ds->x);
    free(ds->labels);
    free(ds->targets);
    free(ds->answer);
    *ds = (rt_dataset){0};
}

/* Solves the normal equations of [X 1] beta = t in double: beta[0..d) the
 * weights, beta[d] the bias. */
void ttrain_least_squares(const rt_dataset *ds, double *beta)
{
    int d = ds->features, m = d + 1;
    double a[TTRAIN_MAXD + 1][TTRAIN_MAXD + 2] = {{0}};
    for (size_t s = 0; s < ds->n; s++) {
        double row[TTRAIN_MAXD + 1];
        for (int j = 0; j < d; j++)
            row[j] = ds->x[s * (size_t)d + (size_t)j];
        row[d] = 1;
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < m; j++)
                a[i][j] += row[i] * row[j];
            a[i][m] += row[i] * ds->targets[s];
        }
    }
    /* Gaussian elimination with partial pivoting. */
    for (int c = 0; c < m; c++) {
        int piv = c;
        for (int r = c + 1; r < m; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c]))
                piv = r;
        for (int j = 0; j <= m; j++) {
            double tmp = a[c][j];
            a[c][j] = a[piv][j];
            a[piv][j] = tmp;
        }
        for (int r = 0; r < m; r++) {
            if (r == c)
                continue;
            double k = a[r][c] / a[c][c];
            for (int j = c; j <= m; j++)
                a[r][j] -= k * a[c][j];
        }
    }
    for (int i = 0; i < m; i++)
        beta[i] = a[i][m] / a[i][i];
}
