/* CPU lists ("0-3,8", the form of taskset -c and /proc's
 * Cpus_allowed_list) and the share of them each local worker is bound to. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "config_int.h"

static bool parse_cpu(const char **s, long *out)
{
    if (!isdigit((unsigned char)**s))
        return false;
    char *end;
    errno = 0;
    long v = strtol(*s, &end, 10);
    if (errno || v >= CPU_SETSIZE)
        return false;
    *s = end;
    *out = v;
    return true;
}

int conf_cpus_parse(const char *s, cpu_set_t *out)
{
    CPU_ZERO(out);
    if (!s || !*s)
        return FERRY_EINVAL;
    for (;;) {
        long lo, hi;
        if (!parse_cpu(&s, &lo))
            return FERRY_EINVAL;
        hi = lo;
        if (*s == '-') {
            s++;
            if (!parse_cpu(&s, &hi) || hi < lo)
                return FERRY_EINVAL;
        }
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, out);
        if (*s == '\0')
            return 0;
        if (*s++ != ',')
            return FERRY_EINVAL;
    }
}

char *conf_cpus_format(char *buf, size_t len, const cpu_set_t *set)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int hi = c;
        while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set))
            hi++;
        int n = hi == c ? snprintf(buf + at, len - at, "%s%d", at ? "," : "", c)
                        : snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", c, hi);
        if (n < 0 || (size_t)n >= len - at) {
            buf[at] = '\0'; /* whole entries only */
            break;
        }
        at += (size_t)n;
        c = hi;
    }
    return buf;
}

void conf_cpus_share(const cpu_set_t *avail, size_t i, size_t n, cpu_set_t *out)
{
    CPU_ZERO(out);
    int cpus[CPU_SETSIZE], count = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, avail))
            cpus[count++] = c;
    if (count == 0 || n == 0)
        return;
    if (n >= (size_t)count) {
        CPU_SET(cpus[i % (size_t)count], out);
        return;
    }
    size_t base = (size_t)count / n, extra = (size_t)count % n;
    size_t first = i * base + (i < extra ? i : extra);
    size_t take = base + (i < extra);
    for (size_t k = 0; k < take; k++)
        CPU_SET(cpus[first + k], out);
}
