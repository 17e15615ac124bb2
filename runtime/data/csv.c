/* runtime/data — CSV and TSV with a header row, through Debian's libcsv
 * (RFC 4180 quoting, fields split across reads). libcsv finds the fields;
 * this file knows lines and columns, so that every refusal says where:
 * the buffer is fed a line at a time (libcsv keeps a quoted field's state
 * across calls), and a row ends on the line being fed. */
#include "data_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <csv.h>

#include "ferry/error.h"

#define CSV_MAX_CLASSES 65536

typedef struct parse {
    const char *name, *label;
    rt_csv *out;
    size_t line;    /* 1-based, the line being fed */
    int col;        /* fields of the current row so far */
    size_t cap_x;   /* floats room in out->x */
    char **cells;   /* the header's names while it is read */
    float *row;     /* this row's features */
    double yval;
    bool y_text;    /* the label column holds names */
    const char *y_str;
    size_t y_len;
    bool pending;   /* libcsv holds part of a row */
    size_t rows_hint; /* rows the file's size suggests */
    char delim;
    size_t nonfinite, nf_line;
    int nf_col;
    int rc;
    char *err;
    size_t errlen;
} parse;

/* The label column: --label's, else label, target, class or y, else the
 * last. */
static int pick_label(parse *p)
{
    rt_csv *c = p->out;
    if (p->label && p->label[0]) {
        for (int i = 0; i < c->cols; i++)
            if (strcmp(c->names[i], p->label) == 0)
                return i;
        char have[512] = "";
        size_t used = 0;
        for (int i = 0; i < c->cols && used + 1 < sizeof have; i++) {
            int w = snprintf(have + used, sizeof have - used, "%s%s", i ? ", " : "",
                             c->names[i]);
            used += w > 0 ? (size_t)w : 0;
        }
        return base_errf(p->err, p->errlen, FERRY_ENOENT,
                         "%s: no label column \"%s\" (its columns: %s)", p->name, p->label,
                         have);
    }
    static const char *const usual[] = {"label", "target", "class", "y"};
    for (size_t u = 0; u < sizeof usual / sizeof *usual; u++)
        for (int i = 0; i < c->cols; i++)
            if (strcasecmp(c->names[i], usual[u]) == 0)
                return i;
    return c->cols - 1;
}

/* The class index of a label's name, interned as it is first seen. */
static int32_t intern(parse *p, const char *s, size_t len)
{
    rt_csv *c = p->out;
    for (int i = 0; i < c->n_classes; i++)
        if (strlen(c->classes[i]) == len && memcmp(c->classes[i], s, len) == 0)
            return i;
    if (c->n_classes == CSV_MAX_CLASSES)
        return -1;
    char **grown = realloc(c->classes, (size_t)(c->n_classes + 1) * sizeof *grown);
    char *copy = malloc(len + 1);
    if (grown)
        c->classes = grown;
    if (!grown || !copy) {
        free(copy);
        return -2;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    c->classes[c->n_classes] = copy;
    return c->n_classes++;
}

static void header_field(parse *p, const char *s, size_t len)
{
    rt_csv *c = p->out;
    char **grown = realloc(c->names, (size_t)(c->cols + 1) * sizeof *grown);
    if (!grown) {
        p->rc = FERRY_ENOMEM;
        return;
    }
    c->names = grown;
    c->names[c->cols] = strndup(s, len);
    if (!c->names[c->cols]) {
        p->rc = FERRY_ENOMEM;
        return;
    }
    c->cols++;
}

/* A row's field; `known` its number when the caller has read it. */
static void data_field(parse *p, const char *s, size_t len, const double *known)
{
    rt_csv *c = p->out;
    int col = p->col;
    if (col >= c->cols)
        return; /* a ragged row: the row's end says so */
    if (col == c->label_col) {
        p->y_str = s;
        p->y_len = len;
        if (c->rows == 0 && !known && !rt_csv_number(s, len, &p->yval))
            p->y_text = true;
        if (p->y_text) {
            int32_t id = intern(p, s, len);
            if (id < 0) {
                p->rc = id == -1 ? base_errf(p->err, p->errlen, FERRY_EINVAL,
                                             "%s: line %zu: more than %d distinct labels",
                                             p->name, p->line, CSV_MAX_CLASSES)
                                 : FERRY_ENOMEM;
                return;
            }
            p->yval = id;
            return;
        }
    }
    double v;
    if (known)
        v = *known;
    else if (!rt_csv_number(s, len, &v)) {
        p->rc = base_errf(p->err, p->errlen, FERRY_ECORRUPT,
                          "%s: line %zu, column %d (%s): \"%.*s\" is not a number",
                          p->name, p->line, col + 1, c->names[col],
                          (int)(len > 40 ? 40 : len), s);
        return;
    }
    /* A feature beyond float's range would become infinite. */
    bool finite = col == c->label_col ? isfinite(v) : isfinite((float)v);
    if (!finite && p->nonfinite++ == 0) {
        p->nf_line = p->line;
        p->nf_col = col + 1;
    }
    if (col == c->label_col)
        p->yval = v;
    else
        p->row[col < c->label_col ? col : col - 1] = (float)v;
}

static void field(parse *p, const char *s, size_t len, const double *known)
{
    if (p->rc == 0) {
        if (p->out->names && p->out->label_col >= 0)
            data_field(p, s ? s : "", len, known);
        else
            header_field(p, s ? s : "", len);
    }
    p->col++;
}

static void on_field(void *s, size_t len, void *arg)
{
    field(arg, s, len, NULL);
}

/* After the header: the label column and the row buffers. */
static void header_done(parse *p)
{
    rt_csv *c = p->out;
    int lc = pick_label(p);
    if (lc < 0) {
        p->rc = lc;
        return;
    }
    c->label_col = lc;
    c->features = c->cols - 1;
    if (c->features < 1)
        p->rc = base_errf(p->err, p->errlen, FERRY_ECORRUPT,
                          "%s: one column (%s): no features beside the label", p->name,
                          c->names[0]);
    else if (!(p->row = calloc((size_t)c->features, sizeof(float))))
        p->rc = FERRY_ENOMEM;
}

static void append_row(parse *p)
{
    rt_csv *c = p->out;
    size_t f = (size_t)c->features;
    if ((c->rows + 1) * f > p->cap_x) {
        /* The first guess from the file's size and the first row's length
         * spares the copies of growing. */
        size_t cap = p->cap_x ? p->cap_x * 2 : f * (p->rows_hint > 1024 ? p->rows_hint : 1024);
        float *x = realloc(c->x, cap * sizeof(float));
        double *y = realloc(c->y, cap / f * sizeof(double));
        if (x)
            c->x = x;
        if (y)
            c->y = y;
        if (!x || !y) {
            p->rc = FERRY_ENOMEM;
            return;
        }
        p->cap_x = cap;
    }
    memcpy(c->x + c->rows * f, p->row, f * sizeof(float));
    c->y[c->rows++] = p->yval;
}

static void on_row(int term, void *arg)
{
    (void)term;
    parse *p = arg;
    rt_csv *c = p->out;
    int found = p->col;
    p->col = 0;
    p->pending = false;
    if (p->rc != 0)
        return;
    if (c->label_col < 0) {
        header_done(p);
        return;
    }
    if (found != c->cols) {
        p->rc = base_errf(p->err, p->errlen, FERRY_ECORRUPT,
                          "%s: line %zu: %d columns expected (as the header), %d found",
                          p->name, p->line, c->cols, found);
        return;
    }
    append_row(p);
}

/* Names sorted, so that a class's index does not depend on which row
 * came first; ids rewritten to match. */
static int sort_classes(rt_csv *c)
{
    int n = c->n_classes;
    int *order = malloc((size_t)n * sizeof *order), *rank = malloc((size_t)n * sizeof *rank);
    char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!order || !rank || !sorted) {
        free(order);
        free(rank);
        free(sorted);
        return FERRY_ENOMEM;
    }
    for (int i = 0; i < n; i++)
        order[i] = i;
    /* Insertion sort: a few classes, and no global for a qsort comparator. */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(c->classes[order[j - 1]], c->classes[order[j]]) > 0;
             j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        rank[order[i]] = i;
        sorted[i] = c->classes[order[i]];
    }
    for (size_t r = 0; r < c->rows; r++)
        c->y[r] = rank[(int)c->y[r]];
    free(c->classes);
    c->classes = sorted;
    free(order);
    free(rank);
    return 0;
}

/* A line with no quote, outside a quoted field: split here, as libcsv
 * would (spaces and tabs around a field trimmed, an empty line skipped),
 * without its per-byte state machine. */
static void plain_line(parse *p, const char *s, size_t n)
{
    const char *end = s + n;
    while (end > s && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    if (end == s)
        return;
    bool rows = p->out->label_col >= 0;
    for (;;) {
        /* Most cells of a row are plain decimals: read where they stand,
         * the number's end found by reading it rather than by a search
         * for the delimiter and a second pass over the digits. */
        double v;
        const char *ne = rows && s < end && *s != ' ' && *s != '\t'
                             ? rt_csv_number_prefix(s, end, &v)
                             : NULL;
        if (ne && (ne == end || *ne == p->delim)) {
            field(p, s, (size_t)(ne - s), &v);
            if (ne == end)
                break;
            s = ne + 1;
            continue;
        }
        const char *d = memchr(s, p->delim, (size_t)(end - s));
        const char *fe = d ? d : end, *fs = s;
        while (fs < fe && (*fs == ' ' || (*fs == '\t' && p->delim != '\t')))
            fs++;
        while (fe > fs && (fe[-1] == ' ' || (fe[-1] == '\t' && p->delim != '\t')))
            fe--;
        field(p, fs, (size_t)(fe - fs), NULL);
        if (!d)
            break;
        s = d + 1;
    }
    on_row('\n', p);
}

/* Feeds buf a line at a time; the line number is the line being fed. */
static void feed(struct csv_parser *cp, parse *p, const char *buf, size_t len)
{
    size_t at = 0;
    while (at < len && p->rc == 0) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (buf + at)) + 1 : len - at;
        p->line++;
        if (!p->pending && !memchr(buf + at, '"', n)) {
            plain_line(p, buf + at, n);
            at += n;
            continue;
        }
        p->pending = true;
        if (csv_parse(cp, buf + at, n, on_field, on_row, p) != n) {
            p->rc = base_errf(p->err, p->errlen, FERRY_ECORRUPT, "%s: line %zu: %s",
                              p->name, p->line, csv_strerror(csv_error(cp)));
            return;
        }
        at += n;
    }
    if (p->rc == 0)
        csv_fini(cp, on_field, on_row, p);
}

static bool looks_tsv(const char *name, const char *buf, size_t len)
{
    size_t l = strlen(name);
    if (l > 4 && strcasecmp(name + l - 4, ".tsv") == 0)
        return true;
    const char *nl = memchr(buf, '\n', len);
    size_t first = nl ? (size_t)(nl - buf) : len;
    return memchr(buf, '\t', first) && !memchr(buf, ',', first);
}

int rt_csv_parse(const char *name, const char *buf, size_t len, const char *label,
                 rt_csv *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->label_col = -1;
    parse p = {.name = name, .label = label, .out = out, .err = err, .errlen = errlen};
    struct csv_parser cp;
    if (csv_init(&cp, CSV_APPEND_NULL) != 0)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", name);
    p.delim = looks_tsv(name, buf, len) ? '\t' : ',';
    const char *nl = memchr(buf, '\n', len);
    const char *nl2 = nl ? memchr(nl + 1, '\n', len - (size_t)(nl + 1 - buf)) : NULL;
    if (nl2 && nl2 > nl + 1)
        p.rows_hint = len / (size_t)(nl2 - nl) + len / (size_t)(nl2 - nl) / 8 + 16;
    csv_set_delim(&cp, (unsigned char)p.delim);
    feed(&cp, &p, buf, len);
    csv_free(&cp);
    free(p.row);
    int rc = p.rc;
    if (rc == FERRY_ENOMEM)
        base_errf(err, errlen, rc, "%s: no memory at line %zu", name, p.line);
    else if (rc == 0 && out->cols == 0)
        rc = base_errf(err, errlen, FERRY_ECORRUPT, "%s: empty file, no header", name);
    else if (rc == 0 && out->rows == 0)
        rc = base_errf(err, errlen, FERRY_ECORRUPT, "%s: a header and no rows", name);
    else if (rc == 0 && p.nonfinite)
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s: %zu NaN or infinite values, the first at line %zu, column %d",
                       name, p.nonfinite, p.nf_line, p.nf_col);
    if (rc == 0 && out->n_classes)
        rc = sort_classes(out);
    if (rc != 0)
        rt_csv_free(out);
    return rc;
}

void rt_csv_free(rt_csv *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->cols; i++)
        free(c->names ? c->names[i] : NULL);
    for (int i = 0; i < c->n_classes; i++)
        free(c->classes[i]);
    free(c->names);
    free(c->classes);
    free(c->x);
    free(c->y);
    memset(c, 0, sizeof *c);
}
