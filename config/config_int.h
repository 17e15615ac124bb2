/* config — private header shared by the files of this folder. */
#ifndef FERRY_CONFIG_INT_H
#define FERRY_CONFIG_INT_H

#include "config.h"

/* The longest host name or address conf_parse_address() accepts (RFC 1035). */
#define CONF_HOST_MAX 253

/* True for a host name ("gpu-host-2", "localhost"), an IPv4 address or a
 * bare IPv6 address ("::1", "fe80::1%eth0"). */
bool conf_valid_host(const char *host);

/* conf_split_address() with a lower bound on the port and, on failure,
 * "expected ..., got '<address>'" in why. */
int conf_parse_address(const char *address, char *host, size_t hostlen, int *port,
                       int min_port, char *why, size_t whylen);

/* True when every number in `c` is in the range conf_load() accepts and
 * listen is a valid host: what conf_save() writes must load again. */
bool conf_values_valid(const conf_cluster *c);

/* Deep copy of src into dst (zeroed first). Returns 0 or FERRY_ENOMEM. */
int conf_copy(conf_cluster *dst, const conf_cluster *src);

/* `path` made absolute: itself when it starts with '/', else joined to
 * `dir` (NULL: the current directory; a relative dir is taken from the
 * current directory too). Returns 0 with *out to free(), or -errno /
 * FERRY_ENOMEM. */
int conf_absolute_path(const char *dir, const char *path, char **out);

#endif
