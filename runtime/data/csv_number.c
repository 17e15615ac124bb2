/* runtime/data — a CSV cell's number, fast: most cells are short decimals
 * ("0.25", "-3e2"), which Clinger's fast path turns into the correctly
 * rounded double with one multiplication or division (a mantissa below
 * 2^53 and a power of ten up to 22 are both exact); anything else goes to
 * strtod, whose answer is the same. strtod's locale and generality made it
 * most of the time of parsing a CSV of numbers. */
#include "data_int.h"

#include <stdlib.h>

static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

/* [+-]digits[.digits][(e|E)[+-]digits] at the start of s: the end of
 * it, or NULL when s does not start with that or it does not fit the
 * fast path. */
const char *rt_csv_number_prefix(const char *s, const char *end, double *v)
{
    bool neg = false;
    if (s < end && (*s == '+' || *s == '-'))
        neg = *s++ == '-';
    /* m stays below 2^53: exact as a double. */
    const uint64_t cap = ((uint64_t)1 << 53) / 10 - 1;
    uint64_t m = 0;
    int scale = 0;
    const char *start = s;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (m >= cap)
            return NULL;
        m = m * 10 + (uint64_t)(*s - '0');
    }
    bool whole = s > start;
    if (s < end && *s == '.') {
        const char *frac = ++s;
        for (; s < end && *s >= '0' && *s <= '9'; s++, scale--) {
            if (m >= cap)
                return NULL;
            m = m * 10 + (uint64_t)(*s - '0');
        }
        whole |= s > frac;
    }
    if (!whole)
        return NULL;
    if (s < end && (*s == 'e' || *s == 'E')) {
        s++;
        bool eneg = false;
        if (s < end && (*s == '+' || *s == '-'))
            eneg = *s++ == '-';
        int e = 0;
        const char *es = s;
        for (; s < end && *s >= '0' && *s <= '9' && e < 10000; s++)
            e = e * 10 + (*s - '0');
        if (s == es)
            return NULL;
        scale += eneg ? -e : e;
    }
    if (scale < -22 || scale > 22)
        return NULL;
    double d = (double)m;
    d = scale < 0 ? d / pow10[-scale] : d * pow10[scale];
    *v = neg ? -d : d;
    return s;
}

bool rt_csv_number(const char *s, size_t len, double *v)
{
    const char *end = s + len;
    while (s < end && space(*s))
        s++;
    while (end > s && space(end[-1]))
        end--;
    if (s == end)
        return false;
    if (rt_csv_number_prefix(s, end, v) == end)
        return true;
    /* strtod needs a terminated string. */
    size_t n = (size_t)(end - s);
    char small[128], *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return false;
    for (size_t i = 0; i < n; i++)
        buf[i] = s[i];
    buf[n] = '\0';
    char *stop;
    *v = strtod(buf, &stop);
    bool ok = stop == buf + n;
    if (buf != small)
        free(buf);
    return ok;
}
