/* ferry_strerror / ferry_err_name: the public error table, and the
 * library's version. */
#include <errno.h>

#include <ferry/error.h>
#include <ferry/ferry.h>

/* The public header spells Linux's errno values out so that it includes
 * nothing; check them against the system's here. */
#define CHECK_POSIX(name, value, msg) _Static_assert((value) == -name, "FERRY_" #name);
FERRY_POSIX_ERRNO_MAP(CHECK_POSIX)
#undef CHECK_POSIX

const char *ferry_strerror(int err)
{
    switch (err) {
#define STR(name, value, msg)                                                            \
    case value:                                                                          \
        return msg;
        FERRY_ERRNO_MAP(STR)
#undef STR
    }
    return "unknown error";
}

const char *ferry_err_name(int err)
{
    switch (err) {
#define NAME(name, value, msg)                                                           \
    case value:                                                                          \
        return #name;
        FERRY_ERRNO_MAP(NAME)
#undef NAME
    }
    return "UNKNOWN";
}

const char *ferry_version(void)
{
    return FERRY_VERSION_STRING;
}
