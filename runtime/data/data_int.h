/* runtime/data — what its files share: the arrays' allocator, element
 * types, mapped files and the readers' headers. */
#ifndef FERRY_RUNTIME_DATA_INT_H
#define FERRY_RUNTIME_DATA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "runtime/data/data.h"

/* 64-byte aligned memory for n bytes (a whole number of cache lines,
 * at least one; 2 MiB-aligned transparent huge pages from 2 MiB up),
 * released with free(); NULL when out of memory. */
void *rt_data_alloc(size_t n);

/* ---- a rank's shard (shard.c) ------------------------------------------------- */

/* Rank r's part of a global batch of `size`: W nearly equal contiguous
 * slices, the first (size % W) one larger. */
void rt_rank_slice(size_t size, int rank, int world, size_t *start, size_t *len);
/* Rank r's shard of n samples read in global batches of `batch`: the
 * samples [lo, lo + len) its slices of an epoch's batches add up to. The
 * shards of the W ranks cover [0, n) once, in rank order. */
void rt_shard_of(size_t n, size_t batch, int rank, int world, size_t *lo, size_t *len);
/* 256 KiB runs of the file, 16 of them shuffled together: 4 MiB a window. */
#define RT_SHARD_BLOCK_BYTES   ((size_t)256 << 10)
#define RT_SHARD_WINDOW_BLOCKS 16
/* Samples a block holds when a sample takes row_bytes of its file. */
size_t rt_shard_block_rows(size_t row_bytes);
/* Blocks of a shard of len samples (the scratch rt_shard_order needs). */
size_t rt_shard_blocks(size_t len, size_t block_rows);
/* Writes perm[0..len) with the samples lo..lo+len-1 in epoch `epoch`'s
 * order for `rank`: a block shuffle drawn from (seed, rank, epoch), or
 * the file's order when not shuffled. order: rt_shard_blocks() entries
 * of scratch. */
void rt_shard_order(uint32_t *perm, uint32_t *order, size_t lo, size_t len,
                    size_t block_rows, bool shuffled, uint64_t seed, int rank, int epoch);

/* ---- arrays as files hold them ---------------------------------------------- */

/* The element types a data file may hold (NumPy's u1 i1 i2 i4 i8 f2 f4 f8,
 * IDX's 0x08 0x09 0x0B 0x0C 0x0D 0x0E, HDF5's native ones). */
typedef enum rt_dtype {
    RT_DT_U8,
    RT_DT_I8,
    RT_DT_I16,
    RT_DT_I32,
    RT_DT_I64,
    RT_DT_F16,
    RT_DT_F32,
    RT_DT_F64,
} rt_dtype;

#define RT_ARRAY_MAX_DIMS 16

/* An n-dimensional array in C order, as a file holds it: `data` points into
 * a file mapping (map, map_len), or into memory of its own (owned), and is
 * converted element by element when read (rt_array_floats). */
typedef struct rt_array {
    rt_dtype type;
    bool swap; /* big-endian elements */
    int ndims;
    uint64_t dims[RT_ARRAY_MAX_DIMS];
    size_t count; /* elements: the product of dims */
    const uint8_t *data;
    void *owned;
    void *map;
    size_t map_len;
} rt_array;

size_t rt_dtype_size(rt_dtype t);
/* "uint8", "int16", "float32"... */
const char *rt_dtype_name(rt_dtype t);
bool rt_dtype_is_float(rt_dtype t);
/* Sets a->count from its dims; false when the product overflows
 * SIZE_MAX / 8. */
bool rt_array_count(rt_array *a);
/* Elements [first, first + n) converted to float. */
void rt_array_floats(const rt_array *a, size_t first, size_t n, float *out);
/* Element i as a double. */
double rt_array_get(const rt_array *a, size_t i);
/* Unmaps or frees, and zeroes *a. NULL: no-op. */
void rt_array_free(rt_array *a);

/* Maps the whole of `path` read-only (a regular file; an empty one maps
 * nothing). 0, or FERRY_ENOENT, FERRY_EACCES, FERRY_EIO with err naming
 * the file. */
int rt_map_file(const char *path, void **map, size_t *len, char *err, size_t errlen);

/* ---- the header parsers (pure: the fuzz targets call them) ------------------- */

/* The largest .npy header read: NumPy itself refuses more than 10,000
 * bytes unless told otherwise. */
#define RT_NPY_HEADER_CAP 65536

/* Starts reading a header of `len` bytes: zeroes *a; FERRY_ECORRUPT with
 * "<name>: empty file, not <what>" for an empty file. */
int rt_header_begin(const char *name, size_t len, const char *what, rt_array *a,
                    char *err, size_t errlen);

/* Parses an .npy file's header at the start of buf[len]: its dtype, order
 * and shape into `a` (data left NULL), and where the data begins. 0, or
 * FERRY_ECORRUPT (not NumPy, a header beyond RT_NPY_HEADER_CAP, an object,
 * structured or unsupported dtype, Fortran order, truncated) with err
 * naming `name`. */
int rt_npy_header(const char *name, const uint8_t *buf, size_t len, rt_array *a,
                  size_t *data_off, char *err, size_t errlen);

/* Parses an IDX header (magic, then 4-byte big-endian sizes) from
 * buf[len]: the type and shape into `a`, and its length into *hdr_len. 0,
 * or FERRY_ECORRUPT with err naming `name`. */
int rt_idx_header(const char *name, const uint8_t *buf, size_t len, rt_array *a,
                  size_t *hdr_len, char *err, size_t errlen);

struct gzFile_s; /* zlib's gzFile */

/* ---- reading files (idx.c) ---------------------------------------------------- */

/* Opens a regular file for reading without blocking on a FIFO; 0 or an
 * error naming it. */
int rt_data_open_file(const char *path, int *fd_out, char *err, size_t errlen);
/* rt_data_open_file, then zlib's reader on it (gzip or plain). */
int rt_gz_open(const char *path, struct gzFile_s **out, char *err, size_t errlen);
/* gzread until len bytes: 0, -1 on a short read, 1 when `cancel` says
 * so; *got the bytes read. */
int rt_gz_read_full(struct gzFile_s *gz, void *buf, size_t len, const rt_data_cancel *cancel,
                    size_t *got);
/* The error for a short read of `what` (want bytes, got found). */
int rt_gz_short_read(struct gzFile_s *gz, const char *path, const char *what, size_t want,
                     size_t got, char *err, size_t errlen);

/* A CSV or TSV file's contents (tabs when the name ends in .tsv or the
 * header has tabs and no commas). */
typedef struct rt_csv {
    size_t rows;
    int cols, features;
    char **names;       /* the header's cols names */
    int label_col;
    float *x;           /* rows x features, in the file's column order */
    double *y;          /* the labels: numbers, or class indices */
    char **classes;     /* string labels' names, sorted: y indexes them */
    int n_classes;      /* 0: the labels were numbers */
} rt_csv;

/* Parses buf[len] (the file `name`): a header row, then rows of numbers;
 * the label column is `label` (NULL: label, target, class or y, else the
 * last), numbers or names. 0, or FERRY_ECORRUPT (not a number, a ragged
 * row, an empty file, a header alone, NaN or infinite values), FERRY_ENOENT
 * (no such label column), FERRY_ENOMEM; err says where. */
int rt_csv_parse(const char *name, const char *buf, size_t len, const char *label,
                 rt_csv *out, char *err, size_t errlen);
void rt_csv_free(rt_csv *c);
/* A cell's number (spaces around it allowed), as strtod reads it, only
 * faster for plain decimals. */
bool rt_csv_number(const char *s, size_t len, double *v);
/* The plain decimal at the start of s[0, end) (no spaces), as
 * rt_csv_number reads it: where it ends, or NULL when s does not start
 * with one rt_csv_number's fast path reads. */
const char *rt_csv_number_prefix(const char *s, const char *end, double *v);

/* ---- the readers -------------------------------------------------------------- */

/* An .npy file, memory-mapped: the array points into the mapping. */
int rt_npy_read(const char *path, rt_array *out, char *err, size_t errlen);
/* Member `key` (`key`.npy) of an .npz, read from the zip in `buf`
 * (len bytes; the caller's mapping) or from the file `path` when buf is
 * NULL. Members are checked against the cap before anything is inflated.
 * FERRY_ENOENT names the keys it has. */
#define RT_NPZ_MEMBER_CAP ((uint64_t)64 << 30)
int rt_npz_read(const char *path, const uint8_t *buf, size_t len, const char *key,
                uint64_t cap, rt_array *out, char *err, size_t errlen);
/* An IDX file of any element type and dimension count, gzip or plain. */
int rt_idx_read_array(const char *path, const rt_data_cancel *cancel, rt_array *out,
                      char *err, size_t errlen);

/* An HDF5 dataset, read whole (FERRY_ENOTSUP when built without HDF5). */
int rt_h5_read(const char *path, const char *key, rt_array *out, char *err,
               size_t errlen);

/* ---- a user's set between its file and an rt_dataset --------------------------- */

/* One file's samples and labels as read: arrays (x, and y unless absent),
 * or a CSV's contents. */
typedef struct rt_raw {
    const char *path;
    const char *x_key; /* an .npz's samples' member (NULL: an .npy) */
    bool is_csv;
    rt_array x, y;
    rt_csv csv;
    void *map; /* the CSV's mapping */
    size_t map_len;
} rt_raw;

/* Reads `path` (and `labels` beside it, for an .npy or IDX file), its
 * format known from its first bytes, else from its name. */
int rt_raw_read(const rt_data_source *s, const char *path, const char *labels,
                const rt_data_cancel *cancel, rt_raw *out, char *err, size_t errlen);
void rt_raw_free(rt_raw *r);

/* Samples in r. */
size_t rt_raw_count(const rt_raw *r);
/* Converts rows[0..n) of r (rows NULL: 0..n) into `ds` (shape, x, labels
 * or targets, class names); `classes_of` (may be NULL) is the training
 * set whose class names a test set's must be among. */
int rt_raw_to_set(const rt_raw *r, const uint32_t *rows, size_t n,
                  const rt_dataset *classes_of, rt_dataset *ds, char *err, size_t errlen);

/* Refuses (FERRY_ECORRUPT, naming `path`, the count and the first sample
 * and number) NaN or infinite values among samples [lo, lo + n) of a set
 * read in place (a set in memory was checked as it was read: 0). */
int rt_dataset_check_finite(const rt_dataset *ds, size_t lo, size_t n, const char *path,
                            char *err, size_t errlen);

/* Computes `how` ("standard", "minmax", "none") from train, stores it in
 * train and applies it to both (test may be NULL). 0, FERRY_EINVAL for an
 * unknown name, FERRY_ENOMEM. */
int rt_normalize(rt_dataset *train, rt_dataset *test, const char *how, char *err,
                 size_t errlen);
/* Writes train->about: the file, samples, shape, classes and their
 * balance, the test set, the normalisation. */
void rt_data_describe(rt_dataset *train, const rt_dataset *test, const char *path,
                      const char *how);

#endif
