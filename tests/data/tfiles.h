/* tests/data — writers for the user-file formats the tests read and
 * damage: .npy bytes, .npz zips (libzip), CSV text. */
#ifndef FERRY_TESTS_DATA_TFILES_H
#define FERRY_TESTS_DATA_TFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An .npy (version 1) of `descr` ('<f4'...), the shape and the data, in a
 * malloc'ed buffer of *out_len bytes; `dict` replaces the whole header
 * dict when not NULL. */
uint8_t *tf_npy(const char *descr, const uint64_t *shape, int ndims, const void *data,
                size_t len, const char *dict, size_t *out_len);
/* Writes tf_npy's bytes to path. */
void tf_write_npy(const char *path, const char *descr, const uint64_t *shape, int ndims,
                  const void *data, size_t len);
/* A zip at path of n members (names[i], bytes[i] of lens[i]), stored or
 * deflated. */
void tf_write_zip(const char *path, int n, const char *const *names,
                  const uint8_t *const *bytes, const size_t *lens, bool deflate);
/* Writes text to path. */
void tf_write_text(const char *path, const char *text);

#endif
