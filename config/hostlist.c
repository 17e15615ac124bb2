/* Host lists in Slurm's compressed syntax, expanded as `scontrol show
 * hostnames` expands them.
 *
 * A list is items split by commas (or blanks, as Slurm allows); an item is
 * a host name, or text with bracket groups of numbers and ranges
 * ("rack[1-2]-n[01-02]"). A range keeps the zero padding of its first
 * number ("07-10" gives 07 08 09 10). Slurm orders the hosts of an item
 * with several groups oddly but precisely: the last group varies fastest,
 * then the first, the second and so on, the one before the last slowest
 * ("a[1-2]b[3-4]c[5-6]" gives a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...); a
 * parser that counts like an odometer gets every item of three groups
 * wrong. Where Slurm quietly makes something of a mistake (an unclosed
 * bracket, an empty item) this refuses it instead, naming the character. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/* More digits than this could overflow the range arithmetic. */
#define MAX_DIGITS 18

typedef struct span {
    unsigned long long lo, hi;
    int width;
} span;

/* One bracket group and the text before it (offsets into the list). */
typedef struct group {
    size_t text, text_len;
    size_t first, n; /* its spans in the item's span array */
    size_t count;    /* hosts it gives */
} group;

typedef struct item {
    size_t start, len; /* the whole item */
    group *groups;
    size_t n_groups;
    span *spans;
    size_t n_spans;
    size_t count;
} item;

typedef struct hl_parse {
    const char *s;
    char *err;
    size_t errlen;
} hl_parse;

static int refuse(hl_parse *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(hl_parse *p, size_t at, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* The position leads, so a long list cut by the buffer still says it. */
    size_t n = strlen(p->s);
    return base_errf(p->err, p->errlen, FERRY_EINVAL,
                     "%s at character %zu of host list '%.*s%s'", what, at + 1,
                     n > 96 ? 96 : (int)n, p->s, n > 96 ? "..." : "");
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static int push_span(item *it, span sp)
{
    span *s = realloc(it->spans, (it->n_spans + 1) * sizeof *s);
    if (!s)
        return FERRY_ENOMEM;
    it->spans = s;
    s[it->n_spans++] = sp;
    return 0;
}

/* A number of 1..MAX_DIGITS digits at *i. */
static int number(hl_parse *p, size_t *i, unsigned long long *v, int *width)
{
    size_t start = *i;
    *v = 0;
    while (p->s[*i] >= '0' && p->s[*i] <= '9') {
        if (*i - start == MAX_DIGITS)
            return refuse(p, start, "a number of more than %d digits", MAX_DIGITS);
        *v = *v * 10 + (unsigned long long)(p->s[*i] - '0');
        (*i)++;
    }
    if (*i == start)
        return refuse(p, start, "expected a number");
    *width = (int)(*i - start);
    return 0;
}

/* "[1-3,07]" from the '[' at *i; leaves *i past the ']'. */
static int bracket(hl_parse *p, size_t *i, item *it, group *g)
{
    size_t open = (*i)++;
    g->first = it->n_spans;
    g->count = 0;
    for (;;) {
        size_t at = *i;
        span sp = {0};
        if (p->s[at] == '\0')
            return refuse(p, open, "this '[' is not closed");
        if (p->s[at] == '[')
            return refuse(p, at, "a '[' inside brackets");
        int rc = number(p, i, &sp.lo, &sp.width);
        if (rc)
            return rc;
        sp.hi = sp.lo;
        bool ranged = p->s[*i] == '-';
        if (ranged) {
            (*i)++;
            int w;
            if ((rc = number(p, i, &sp.hi, &w)))
                return rc;
        }
        int n = (int)(*i - at);
        if (sp.hi < sp.lo)
            return refuse(p, at, "the range '%.*s' runs backwards", n, p->s + at);
        if (sp.hi - sp.lo >= CONF_HOSTLIST_MAX)
            return refuse(p, at, "the range '%.*s' has more than %d hosts", n, p->s + at,
                          CONF_HOSTLIST_MAX);
        g->count += (size_t)(sp.hi - sp.lo + 1);
        if (g->count > CONF_HOSTLIST_MAX)
            return refuse(p, open, "a bracket group of more than %d hosts",
                          CONF_HOSTLIST_MAX);
        if ((rc = push_span(it, sp)))
            return base_errf(p->err, p->errlen, rc, "out of memory");
        char c = p->s[*i];
        if (c == ',') {
            (*i)++;
        } else if (c == ']') {
            (*i)++;
            g->n = it->n_spans - g->first;
            return 0;
        } else if (c == '\0') {
            return refuse(p, open, "this '[' is not closed");
        } else if (c == '[') {
            return refuse(p, *i, "a '[' inside brackets");
        } else {
            return refuse(p, *i,
                          ranged ? "expected ',' or ']'" : "expected ',', '-' or ']'");
        }
    }
}

/* One item from *i to its end (a separator or the end of the list). */
static int parse_item(hl_parse *p, size_t *i, item *it)
{
    memset(it, 0, sizeof *it);
    it->start = *i;
    size_t text = *i;
    it->count = 1;
    for (;;) {
        char c = p->s[*i];
        if (name_char(c)) {
            (*i)++;
        } else if (c == '[') {
            group *gs = realloc(it->groups, (it->n_groups + 1) * sizeof *gs);
            if (!gs)
                return base_errf(p->err, p->errlen, FERRY_ENOMEM, "out of memory");
            it->groups = gs;
            group *g = &gs[it->n_groups++];
            g->text = text;
            g->text_len = *i - text;
            int rc = bracket(p, i, it, g);
            if (rc)
                return rc;
            /* Both at most CONF_HOSTLIST_MAX: the product cannot overflow. */
            it->count *= g->count;
            if (it->count > CONF_HOSTLIST_MAX)
                return refuse(p, it->start, "an item of more than %d hosts",
                              CONF_HOSTLIST_MAX);
            text = *i;
        } else if (c == ']') {
            return refuse(p, *i, "a ']' that closes no '['");
        } else if (c == ',' || c == '\0' || blank(c)) {
            break;
        } else {
            if ((unsigned char)c < 0x20 || (unsigned char)c > 0x7e)
                return refuse(p, *i, "an unexpected byte 0x%02x", (unsigned char)c);
            return refuse(p, *i, "an unexpected '%c' (expected a host name)", c);
        }
    }
    it->len = *i - it->start;
    if (it->len == 0)
        return refuse(p, it->start, "an empty host name");
    /* Slurm takes no text after the last group ("n[1-2]-ib" is invalid
     * to scontrol): refused alike, so both read a list the same way. */
    if (it->n_groups && *i != text)
        return refuse(p, text, "text after the last ']' (Slurm expands no suffix)");
    return 0;
}

static void item_fini(item *it)
{
    free(it->groups);
    free(it->spans);
}

static int append(conf_hosts *out, char *name)
{
    char **ns = realloc(out->names, (out->n + 1) * sizeof *ns);
    if (!ns) {
        free(name);
        return FERRY_ENOMEM;
    }
    out->names = ns;
    ns[out->n++] = name;
    return 0;
}

/* The k-th value of group g (k < g->count). */
static void group_value(const item *it, const group *g, size_t k, unsigned long long *v,
                        int *width)
{
    for (size_t j = 0; j < g->n; j++) {
        const span *sp = &it->spans[g->first + j];
        size_t n = (size_t)(sp->hi - sp->lo + 1);
        if (k < n) {
            *v = sp->lo + k;
            *width = sp->width;
            return;
        }
        k -= n;
    }
}

/* Writes host `index` of the item into name; Slurm's order (see the top). */
static int item_host(hl_parse *p, const item *it, size_t index, size_t *pick, char *name,
                     size_t len)
{
    size_t ng = it->n_groups;
    /* Least significant first: the last group, then the first, ... */
    for (size_t r = 0; r < ng; r++) {
        size_t g = r == 0 ? ng - 1 : r - 1;
        pick[g] = index % it->groups[g].count;
        index /= it->groups[g].count;
    }
    size_t used = 0;
    for (size_t g = 0; g < ng; g++) {
        const group *gr = &it->groups[g];
        unsigned long long v = 0;
        int width = 1;
        group_value(it, gr, pick[g], &v, &width);
        int n = snprintf(name + used, len - used, "%.*s%0*llu", (int)gr->text_len,
                         p->s + gr->text, width, v);
        if (n < 0 || (size_t)n >= len - used)
            return refuse(p, it->start, "a host name longer than 253 characters");
        used += (size_t)n;
    }
    return 0;
}

static int expand_item(hl_parse *p, const item *it, conf_hosts *out)
{
    char name[CONF_HOST_MAX + 1];
    if (!it->n_groups) {
        if (it->len > CONF_HOST_MAX)
            return refuse(p, it->start, "a host name longer than 253 characters");
        char *copy = strndup(p->s + it->start, it->len);
        if (!copy || append(out, copy))
            return base_errf(p->err, p->errlen, FERRY_ENOMEM, "out of memory");
        return 0;
    }
    size_t *pick = malloc(it->n_groups * sizeof *pick);
    if (!pick)
        return base_errf(p->err, p->errlen, FERRY_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t k = 0; k < it->count && !rc; k++) {
        rc = item_host(p, it, k, pick, name, sizeof name);
        char *copy = rc ? NULL : strdup(name);
        if (!rc && (!copy || append(out, copy)))
            rc = base_errf(p->err, p->errlen, FERRY_ENOMEM, "out of memory");
    }
    free(pick);
    return rc;
}

int conf_hostlist_expand(const char *list, conf_hosts *out, char *err, size_t errlen)
{
    hl_parse p = {.s = list ? list : "", .err = err, .errlen = errlen};
    conf_hosts got = {0};
    size_t i = 0, total = 0;
    int rc = 0;
    while (blank(p.s[i]))
        i++;
    for (;;) {
        item it;
        rc = parse_item(&p, &i, &it);
        if (!rc && (total += it.count) > CONF_HOSTLIST_MAX)
            rc = refuse(&p, it.start, "more than %d hosts in all, reached",
                        CONF_HOSTLIST_MAX);
        if (!rc)
            rc = expand_item(&p, &it, &got);
        item_fini(&it);
        if (rc)
            break;
        while (blank(p.s[i]))
            i++;
        if (p.s[i] == '\0')
            break;
        if (p.s[i] == ',') {
            i++;
            while (blank(p.s[i]))
                i++;
        }
    }
    if (rc) {
        conf_hosts_fini(&got);
        return rc;
    }
    *out = got;
    return 0;
}

void conf_hosts_fini(conf_hosts *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++)
        free(h->names[i]);
    free(h->names);
    h->names = NULL;
    h->n = 0;
}
