/* A libFuzzer target for the CSV reader (runtime/data/csv.c over libcsv):
 * any text gives a table whose rows are whole and whose labels are classes
 * it names, or a refusal that says where. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/data/data_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_csv c;
    char err[256] = "";
    int rc = rt_csv_parse("fuzz.csv", (const char *)data, size, NULL, &c, err, sizeof err);
    if (rc != 0) {
        if ((rc != FERRY_ECORRUPT && rc != FERRY_ENOENT && rc != FERRY_EINVAL &&
             rc != FERRY_ENOMEM) ||
            !err[0])
            abort();
        return 0;
    }
    if (c.rows == 0 || c.features != c.cols - 1 || c.label_col < 0 || c.label_col >= c.cols)
        abort();
    for (size_t i = 0; i < c.rows * (size_t)c.features; i++)
        if (!isfinite(c.x[i]))
            abort(); /* NaN and infinities are refused */
    for (size_t r = 0; r < c.rows; r++)
        if (c.n_classes && (c.y[r] < 0 || c.y[r] >= c.n_classes))
            abort();
    rt_csv_free(&c);
    return 0;
}
