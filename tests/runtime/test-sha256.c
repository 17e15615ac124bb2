/* tests/runtime — rt_sha256_fd: a file hashed a piece at a time gives the
 * digest of its bytes, only the first `size` of them, leaves the
 * descriptor's offset alone, and a file shorter than `size` or a descriptor
 * that cannot be read fails. */
#include "rth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

TestSuite(rt_sha256, .init = rth_setup_dir, .fini = rth_teardown, .timeout = 60);

/* A file of `len` patterned bytes in R.dir, open for reading; its bytes
 * into *bytes when asked. */
static int file_of(const char *name, size_t len, char **bytes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", R.dir, name);
    char *b = malloc(len ? len : 1);
    cr_assert(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (char)(i * 131 + 7);
    FILE *f = fopen(path, "wb");
    cr_assert(f && fwrite(b, 1, len, f) == len && fclose(f) == 0);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0);
    if (bytes)
        *bytes = b;
    else
        free(b);
    return fd;
}

RTH_TEST(rt_sha256, a_file_over_several_reads_hashes_as_its_bytes_do)
{
    size_t len = 200000 + 17; /* several 64 KiB reads and a short last one */
    char *b = NULL;
    int fd = file_of("big.bin", len, &b);
    char want[RT_SHA256_HEX], got[RT_SHA256_HEX];
    rt_sha256_hex(b, len, want);
    cr_expect_eq(rt_sha256_fd(fd, len, got), 0);
    cr_expect_str_eq(got, want);
    /* The first bytes only, and the offset left where it was. */
    cr_assert_eq(lseek(fd, 5, SEEK_SET), 5);
    rt_sha256_hex(b, 1000, want);
    cr_expect_eq(rt_sha256_fd(fd, 1000, got), 0);
    cr_expect_str_eq(got, want);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 5);
    close(fd);
    free(b);
}

RTH_TEST(rt_sha256, an_empty_file_has_the_digest_of_no_bytes)
{
    int fd = file_of("empty.bin", 0, NULL);
    char got[RT_SHA256_HEX];
    cr_expect_eq(rt_sha256_fd(fd, 0, got), 0);
    cr_expect_str_eq(got,
                     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    close(fd);
}

RTH_TEST(rt_sha256, a_short_file_or_an_unreadable_descriptor_fails)
{
    int fd = file_of("short.bin", 100, NULL);
    char got[RT_SHA256_HEX];
    cr_expect_eq(rt_sha256_fd(fd, 101, got), FERRY_EIO);
    close(fd);
    cr_expect_eq(rt_sha256_fd(-1, 10, got), -EBADF);
}
