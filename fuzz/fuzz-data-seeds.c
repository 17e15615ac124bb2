/* Writes the seed corpus of a data-file fuzz target: small valid files of
 * the format its directory is named for (corpus-npy, corpus-npz,
 * corpus-idx, corpus-csv), as numpy and the IDX writers make them. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zip.h>

static void put(const char *dir, const char *name, const void *b, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* An .npy of `dict` and `len` data bytes, padded as numpy pads. */
static size_t npy(const char *dict, size_t len, unsigned char *out)
{
    size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (unsigned char)(total - 10);
    out[9] = (unsigned char)((total - 10) >> 8);
    memset(out + 10, ' ', total - 10);
    memcpy(out + 10, dict, dl);
    out[total - 1] = '\n';
    memset(out + total, 1, len);
    return total + len;
}

static void npz(const char *dir, const unsigned char *x, size_t xl, bool deflate)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, deflate ? "deflated.npz" : "stored.npz");
    int zerr;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    zip_source_t *s = z ? zip_source_buffer(z, x, xl, 0) : NULL;
    zip_int64_t i = s ? zip_file_add(z, "x.npy", s, 0) : -1;
    if (i < 0 ||
        zip_set_file_compression(z, (zip_uint64_t)i, deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                 0) != 0 ||
        zip_close(z) != 0) {
        fprintf(stderr, "%s: cannot write\n", path);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz-data-seeds CORPUS-DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    unsigned char b[1024];
    size_t n;
    if (strstr(dir, "npy") || strstr(dir, "npz")) {
        n = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, b);
        if (strstr(dir, "npz")) {
            npz(dir, b, n, false);
            npz(dir, b, n, true);
            return 0;
        }
        put(dir, "f4.npy", b, n);
        n = npy("{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", 24, b);
        put(dir, "i8be.npy", b, n);
        n = npy("{'descr': '|u1', 'fortran_order': True, 'shape': (), }", 1, b);
        put(dir, "fortran.npy", b, n);
    } else if (strstr(dir, "idx")) {
        static const unsigned char u8[] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2,
                                           0, 0, 0, 2, 1, 2, 3, 4};
        static const unsigned char f32[] = {0, 0, 0x0d, 1, 0, 0, 0, 1, 0x3f, 0x80, 0, 0};
        put(dir, "u8.idx", u8, sizeof u8);
        put(dir, "f32.idx", f32, sizeof f32);
    } else {
        static const char csv[] = "a,b,label\n1,2.5,cat\n-3e2,\"4\",dog\n";
        static const char tsv[] = "x\ty\n1\t0\n2\t1\n";
        put(dir, "names.csv", csv, sizeof csv - 1);
        put(dir, "tabs.csv", tsv, sizeof tsv - 1);
    }
    return 0;
}
