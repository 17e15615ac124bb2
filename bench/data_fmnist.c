/* bench — Fashion-MNIST's pair of sets for the in-process training benches. */
#include "data_fmnist.h"

#include <string.h>

#include "stats.h"

static rt_dataset prefix(const rt_dataset *ds, size_t n)
{
    rt_dataset v = *ds;
    if (n > 0 && n < ds->n)
        v.n = n;
    return v;
}

int bench_fmnist_pair(const char *who, rt_dataset full[2], rt_dataset view[2],
                      size_t n_train, size_t n_test)
{
    char err[512] = "";
    int rc = 0;
    memset(full, 0, 2 * sizeof *full);
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = rt_fmnist_load(NULL, i == 0, &full[i], err, sizeof err);
    if (rc) {
        bench_log("%s: %s", who, err);
        rt_dataset_free(&full[0]);
        rt_dataset_free(&full[1]);
        return rc;
    }
    view[0] = prefix(&full[0], n_train);
    view[1] = prefix(&full[1], n_test);
    return 0;
}
