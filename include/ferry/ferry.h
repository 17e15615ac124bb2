/* ferry — the master-side library: the one header a program that drives a
 * ferry cluster includes. Task plugins include <ferry/task.h> instead. */
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
