/* Reading a launcher's variables: each value whole and in range, each
 * refusal naming the variable and what it held. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "launch_int.h"

const char *launch_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

int launch_number(char *const *envp, const char *name, int lo, int hi, int *out,
                  char *err, size_t errlen)
{
    const char *v = launch_get(envp, name);
    if (!v)
        return FERRY_ENOENT;
    long n;
    /* Digits only: strtol's leading blanks and signs are no launcher's. */
    if (v[0] < '0' || v[0] > '9' || !base_parse_long(v, lo, hi, &n)) {
        if (hi >= INT_MAX - 1)
            return base_errf(err, errlen, FERRY_EINVAL,
                             "%s='%s': expected a whole number from %d up", name, v, lo);
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s='%s': expected a whole number from %d to %d", name, v, lo,
                         hi);
    }
    *out = (int)n;
    return 0;
}

int launch_need(char *const *envp, const char *name, int lo, int hi, int *out, char *err,
                size_t errlen)
{
    int rc = launch_number(envp, name, lo, hi, out, err, errlen);
    if (rc == FERRY_ENOENT)
        return base_errf(err, errlen, FERRY_EINVAL, "%s is not set", name);
    return rc;
}

int launch_rank_world(char *const *envp, const char *rank_var, const char *world_var,
                      launch_info *li, char *err, size_t errlen)
{
    int rc = launch_need(envp, rank_var, 0, INT_MAX - 1, &li->rank, err, errlen);
    if (!rc)
        rc = launch_need(envp, world_var, 1, INT_MAX, &li->world_size, err, errlen);
    if (rc)
        return rc;
    if (li->rank >= li->world_size)
        return base_errf(err, errlen, FERRY_EINVAL, "%s=%d is not below %s=%d", rank_var,
                         li->rank, world_var, li->world_size);
    snprintf(li->rank_from, sizeof li->rank_from, "%s", rank_var);
    snprintf(li->world_from, sizeof li->world_from, "%s", world_var);
    return 0;
}

int launch_local_rank(char *const *envp, const char *var, const char *local_size_var,
                      launch_info *li, char *err, size_t errlen)
{
    li->local_rank = -1;
    int rc = launch_number(envp, var, 0, INT_MAX - 1, &li->local_rank, err, errlen);
    if (rc == FERRY_ENOENT)
        return 0;
    if (rc)
        return rc;
    int size;
    rc = local_size_var
             ? launch_number(envp, local_size_var, 1, INT_MAX, &size, err, errlen)
             : FERRY_ENOENT;
    if (rc == FERRY_ENOENT)
        return 0;
    if (rc)
        return rc;
    if (li->local_rank >= size)
        return base_errf(err, errlen, FERRY_EINVAL, "%s=%d is not below %s=%d", var,
                         li->local_rank, local_size_var, size);
    return 0;
}

/* "host:port" (or "[v6]:port") into li, checked as a worker address is. */
static int address(const char *text, const char *from, launch_info *li, char *err,
                   size_t errlen)
{
    char host[sizeof li->host];
    int port;
    if (conf_split_address(text, host, sizeof host, &port) != 0 || port == 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s: expected a host name or address and a port from 1 to "
                         "65535, got '%s'",
                         from, text);
    snprintf(li->host, sizeof li->host, "%s", host);
    li->port = port;
    snprintf(li->address_from, sizeof li->address_from, "%s", from);
    return 0;
}

int launch_host_port(char *const *envp, const char *host_var, const char *port_var,
                     launch_info *li, char *err, size_t errlen)
{
    const char *host = launch_get(envp, host_var), *port = launch_get(envp, port_var);
    if (!host || !port)
        return base_errf(err, errlen, FERRY_EINVAL, "%s is not set",
                         !host ? host_var : port_var);
    char text[LAUNCH_HOST_MAX + 16], from[LAUNCH_FROM_LEN];
    /* A bare IPv6 address takes brackets to be one with its port. */
    snprintf(text, sizeof text, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
    snprintf(from, sizeof from, "%s, %s", host_var, port_var);
    return address(text, from, li, err, errlen);
}

int launch_rendezvous(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    const char *v = launch_get(envp, "FERRY_RENDEZVOUS");
    if (!v)
        return FERRY_ENOENT;
    return address(v, "FERRY_RENDEZVOUS", li, err, errlen);
}
