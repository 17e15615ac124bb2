/* Worker addresses: "host:port" and "[v6]:port", and which hosts are local. */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"

static bool valid_v6(const char *s, size_t n)
{
    char buf[INET6_ADDRSTRLEN + 32];
    struct in6_addr a;
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    /* A zone ("fe80::1%eth0") is for the resolver; inet_pton rejects it. */
    char *zone = strchr(buf, '%');
    if (zone) {
        if (zone[1] == '\0')
            return false;
        *zone = '\0';
    }
    return inet_pton(AF_INET6, buf, &a) == 1;
}

/* Letters, digits, '-', '_' and '.', no empty label: a DNS name or dotted
 * IPv4 address (the resolver decides which). */
static bool valid_name(const char *s, size_t n)
{
    if (n == 0 || n > CONF_HOST_MAX || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '.' && i + 1 < n && s[i + 1] == '.')
            return false;
        if (!isalnum(ch) && ch != '-' && ch != '_' && ch != '.')
            return false;
    }
    return true;
}

bool conf_valid_host(const char *host)
{
    if (!host)
        return false;
    size_t n = strlen(host);
    return strchr(host, ':') ? valid_v6(host, n) : valid_name(host, n);
}

static int parse_port(const char *s, int min, int *port)
{
    if (*s == '\0' || strlen(s) > 5)
        return FERRY_EINVAL;
    int v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return FERRY_EINVAL;
        v = v * 10 + (*s - '0');
    }
    if (v < min || v > 65535)
        return FERRY_EINVAL;
    *port = v;
    return 0;
}

int conf_parse_address(const char *address, char *host, size_t hostlen, int *port,
                       int min_port, char *why, size_t whylen)
{
    const char *h, *colon;
    size_t n;
    if (!address)
        return base_errf(why, whylen, FERRY_EINVAL, "expected host:port, got nothing");
    if (address[0] == '[') {
        const char *close = strchr(address, ']');
        if (!close || close[1] != ':')
            return base_errf(why, whylen, FERRY_EINVAL,
                             "expected [IPv6 address]:port, got '%s'", address);
        h = address + 1;
        n = (size_t)(close - h);
        colon = close + 1;
        if (!valid_v6(h, n))
            return base_errf(why, whylen, FERRY_EINVAL,
                             "expected an IPv6 address inside [], got '%s'", address);
    } else {
        colon = strrchr(address, ':');
        if (!colon)
            return base_errf(why, whylen, FERRY_EINVAL, "expected host:port, got '%s'",
                             address);
        h = address;
        n = (size_t)(colon - h);
        if (memchr(h, ':', n))
            return base_errf(why, whylen, FERRY_EINVAL,
                             "expected host:port with an IPv6 host in brackets "
                             "([::1]:7100), got '%s'",
                             address);
        if (!valid_name(h, n))
            return base_errf(why, whylen, FERRY_EINVAL,
                             "expected host:port with a host name or address, got '%s'",
                             address);
    }
    if (parse_port(colon + 1, min_port, port))
        return base_errf(why, whylen, FERRY_EINVAL,
                         "expected host:port with a port from %d to 65535, got '%s'",
                         min_port, address);
    if (n >= hostlen)
        return base_errf(why, whylen, FERRY_EINVAL, "host name too long in '%s'",
                         address);
    memcpy(host, h, n);
    host[n] = '\0';
    return 0;
}

int conf_split_address(const char *address, char *host, size_t hostlen, int *port)
{
    return conf_parse_address(address, host, hostlen, port, 0, NULL, 0);
}

char *conf_format_address(char *buf, size_t len, const char *host, int port)
{
    snprintf(buf, len, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    return buf;
}

bool conf_is_loopback(const char *host)
{
    char buf[INET6_ADDRSTRLEN + 32];
    struct in_addr a4;
    struct in6_addr a6;
    if (!host)
        return false;
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n >= sizeof buf)
        return false;
    memcpy(buf, host, n);
    buf[n] = '\0';
    if (strcasecmp(buf, "localhost") == 0 || strcasecmp(buf, "localhost.") == 0)
        return true;
    if (inet_pton(AF_INET, buf, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, buf, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6))
            return true;
        /* ::ffff:127.x.y.z is how an IPv6 socket sees an IPv4 loopback peer. */
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return false;
}

bool conf_is_wildcard(const char *host)
{
    return host && (!host[0] || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0);
}

/* "[::1]:7100" is an address, "[1-2]:7100" a host list of "1" and "2". */
static bool bracketed_v6(const char *address)
{
    const char *close = address[0] == '[' ? strchr(address, ']') : NULL;
    return close && memchr(address + 1, ':', (size_t)(close - address - 1));
}

int conf_worker_addresses(const char *address, conf_hosts *out, char *why, size_t whylen)
{
    const char *colon = address ? strrchr(address, ':') : NULL;
    size_t n = colon ? (size_t)(colon - address) : 0;
    conf_hosts got = {0};
    /* Blanks alone make no list: "a b:7100" is a mistyped address. */
    if (!colon || bracketed_v6(address) || strcspn(address, "[],") >= n) {
        got.names = malloc(sizeof *got.names);
        if (!got.names || !(got.names[0] = base_strdup(address ? address : ""))) {
            free(got.names);
            return base_errf(why, whylen, FERRY_ENOMEM, "out of memory");
        }
        got.n = 1;
        *out = got;
        return 0;
    }
    char *list = strndup(address, n);
    if (!list)
        return base_errf(why, whylen, FERRY_ENOMEM, "out of memory");
    int rc = conf_hostlist_expand(list, &got, why, whylen);
    free(list);
    for (size_t i = 0; !rc && i < got.n; i++) {
        char *a = base_asprintf("%s%s", got.names[i], colon);
        if (!a) {
            rc = base_errf(why, whylen, FERRY_ENOMEM, "out of memory");
            break;
        }
        free(got.names[i]);
        got.names[i] = a;
    }
    if (rc) {
        conf_hosts_fini(&got);
        return rc;
    }
    *out = got;
    return 0;
}
