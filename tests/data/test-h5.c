/* tests/data — HDF5 datasets by name (built when libhdf5 is found). */
#include <hdf5.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"

static void write_h5(const char *path, const char *xname)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert(f >= 0);
    float x[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
    int64_t y[4] = {0, 1, 1, 0};
    hsize_t xd[2] = {4, 2}, yd[1] = {4};
    hid_t xs = H5Screate_simple(2, xd, NULL), ys = H5Screate_simple(1, yd, NULL);
    hid_t dx = H5Dcreate2(f, xname, H5T_IEEE_F32BE, xs, H5P_DEFAULT, H5P_DEFAULT,
                          H5P_DEFAULT);
    hid_t dy = H5Dcreate2(f, "y", H5T_STD_I64LE, ys, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    cr_assert(dx >= 0 && dy >= 0);
    cr_assert(H5Dwrite(dx, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0);
    cr_assert(H5Dwrite(dy, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) >= 0);
    H5Dclose(dx);
    H5Dclose(dy);
    H5Sclose(xs);
    H5Sclose(ys);
    H5Fclose(f);
}

TD_TEST(h5, datasets_are_read_by_name_and_a_missing_one_is_named)
{
    write_h5(td_path("d.h5"), "images");
    rt_data_source s = {.path = td_path("d.h5"), .test_path = td_path("d.h5"),
                        .normalize = "none"};
    rt_dataset tr, te;
    char err[512] = "";
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_ENOENT, err, td_path("d.h5"));
    cr_expect(strstr(err, "no HDF5 dataset \"x\""), "%s", err);
    s.x_key = "images";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_expect(tr.n == 4 && tr.features == 2 && tr.classes == 2);
    cr_expect(tr.x[7] == 7.0f && tr.labels[2] == 1, "big-endian floats converted");
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}
