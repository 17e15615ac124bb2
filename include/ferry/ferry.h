/* ferry — what libferry.so exports, for a program that links it: the
 * library's version (below) and the descriptions of ferry's error codes
 * (ferry_strerror, ferry_err_name: <ferry/error.h>), and nothing else;
 * tests/api checks that the library exports these and no other name.
 *
 * A cluster is driven with the `ferry` command, or from inside a task by
 * its driver (<ferry/task.h>). Task and model modules include <ferry/task.h>
 * (and <ferry/layers.h>) and call ferry only through the tables they are
 * handed. */
#ifndef FERRY_FERRY_H
#define FERRY_FERRY_H

#include <ferry/error.h>
#include <ferry/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library that is linked, as "MAJOR.MINOR.PATCH"; compare
 * with FERRY_VERSION_STRING to catch a header/library mismatch. Static string. */
const char *ferry_version(void);

#ifdef __cplusplus
}
#endif
#endif
