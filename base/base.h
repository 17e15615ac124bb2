/* base — the layer below every other folder: the helpers that rpc/,
 * config/, runtime/ and cluster/ all need, in one place. It includes only
 * libc and the public <ferry/error.h>, and calls nothing above it.
 *
 * Where things are:
 *   error.c        the public error table (ferry_strerror, ferry_err_name)
 *                  and ferry_version
 *   format.c       printf into new memory or into a caller's error buffer
 *   escape.c       text from the wire made safe for a log line
 *   number.c       whole-string number parsing with bounds
 *   atomic_file.c  replacing a file so that a reader never sees a part
 *   clock.c        monotonic and wall-clock readings
 *   cond_wait.h    a bounded wait on a condition variable (inline)
 *
 * Every function is thread-safe; none keeps state. */
#ifndef FERRY_BASE_H
#define FERRY_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/error.h>

/* ---- formatting ----------------------------------------------------------- */

/* printf into new memory: returns a string to free(), or NULL when out of
 * memory. */
char *base_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *base_vasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Writes the printf-style message into err[errlen] (err may be NULL or
 * errlen 0: nothing is written) and returns `code`, so that an error path
 * is one line: `return base_errf(err, errlen, FERRY_EINVAL, "...", ...);`. */
int base_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- strings -------------------------------------------------------------- */

/* strdup(3) that takes NULL (and returns it). */
char *base_strdup(const char *s);

/* Writes `src` (srclen bytes, NULs included) into dst[dstlen] as one line of
 * printable ASCII: a backslash as "\\", any other byte outside 0x20..0x7e
 * as "\xNN". What does not fit is cut and marked "...(N bytes)". Always
 * NUL-terminates (dstlen >= 32). Returns dst. For names that come from the
 * network before they reach a log or a status. */
char *base_escape(char *dst, size_t dstlen, const char *src, size_t srclen);

/* ---- numbers -------------------------------------------------------------- */

/* Parses all of `s` (a trailing newline allowed) as a decimal number in
 * lo..hi. Returns whether it is one; *out is set only then. */
bool base_parse_long(const char *s, long lo, long hi, long *out);

/* Parses all of `s` as a finite number in lo..hi. Returns whether it is
 * one; *out is set only then. */
bool base_parse_double(const char *s, double lo, double hi, double *out);

/* ---- files ---------------------------------------------------------------- */

/* Replaces `path` with `len` bytes of `data`, mode 0600, through a temp file
 * in the same directory renamed over it: a reader sees the old file or the
 * new one, never a part. With `durable`, file and directory are synced
 * first, so the new contents survive a crash once this returns. Returns 0
 * or -errno. */
int base_write_atomic(const char *path, const void *data, size_t len, bool durable);

/* Writes all `len` bytes to `fd`, retrying on EINTR and short writes.
 * Returns 0 or -errno. */
int base_write_all(int fd, const void *data, size_t len);

/* ---- time ----------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds (the clock uv_hrtime() reads), and in
 * milliseconds and seconds as doubles, for measuring intervals. */
uint64_t base_mono_ns(void);
double base_mono_ms(void);
double base_mono_s(void);

/* CLOCK_REALTIME in milliseconds and nanoseconds since the epoch, for
 * times that are written down and read by another process. Async-signal
 * safe (clock_gettime only). */
int64_t base_wall_ms(void);
uint64_t base_wall_ns(void);

#endif
