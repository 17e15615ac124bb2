/* The checkpoint file's bytes, written and checked (ckpt_file.h). The
 * header is text so that `ferry checkpoint show` prints it as it is; the
 * checksum covers the header too, so that a flipped digit of a step count
 * is found like a flipped bit of a weight. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ferry/error.h>

#include "base/base.h"
#include "ckpt_file.h"
#include "runtime/runtime.h"

#define TRAILER_LEN (sizeof "sha256 " - 1 + 64 + 1)

static bool one_word(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return false;
    return true;
}

/* The header's lines into f (an open memory stream). */
static int print_head(FILE *f, const rt_ckpt_head *h)
{
    int rc = 0;
    fputs(h->shards > 0 ? RT_CKPT_MAGIC2 : RT_CKPT_MAGIC, f);
#define PUT_U64(field) fprintf(f, "%s %" PRIu64 "\n", #field, h->field)
#define PUT_I64(field) fprintf(f, "%s %" PRId64 "\n", #field, h->field)
#define PUT_F64(field) fprintf(f, "%s %.17g\n", #field, h->field)
#define PUT_TXT(field)                                                                   \
    (one_word(h->field) ? fprintf(f, "%s %s\n", #field, h->field) : (rc = FERRY_EINVAL))
#define PUT(type, field, meaning) PUT_##type(field);
    RT_CKPT_FIELDS(PUT)
    if (h->shards > 0) {
        RT_CKPT_ASYNC_FIELDS(PUT)
    }
#undef PUT
    fputs("end\n", f);
    return rc;
}

int rt_ckpt_encode(const rt_ckpt_head *h, const void *state, const void *optim,
                   uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    if (!f)
        return FERRY_ENOMEM;
    int rc = print_head(f, h);
    if (fclose(f) != 0 && rc == 0)
        rc = FERRY_ENOMEM;
    if (rc) {
        free(text);
        return rc;
    }
    size_t body = tlen + h->state_bytes + h->optim_bytes;
    uint8_t *b = malloc(body + TRAILER_LEN + 1);
    if (!b) {
        free(text);
        return FERRY_ENOMEM;
    }
    memcpy(b, text, tlen);
    free(text);
    if (h->state_bytes)
        memcpy(b + tlen, state, h->state_bytes);
    if (h->optim_bytes)
        memcpy(b + tlen + h->state_bytes, optim, h->optim_bytes);
    char hex[RT_SHA256_HEX];
    rt_sha256_hex(b, body, hex);
    snprintf((char *)b + body, TRAILER_LEN + 1, "sha256 %s\n", hex);
    *out = b;
    *len = body + TRAILER_LEN;
    return 0;
}

static int slurp(const char *path, uint8_t **out, size_t *len, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return base_errf(why, whylen, errno == ENOENT ? FERRY_ENOENT : FERRY_EIO,
                         "cannot open it: %s", strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        rc = base_errf(why, whylen, FERRY_EINVAL, "not a regular file");
    else if (st.st_size == 0)
        rc = base_errf(why, whylen, FERRY_ECORRUPT, "empty");
    uint8_t *b = rc ? NULL : malloc((size_t)st.st_size + 1);
    if (rc == 0 && !b)
        rc = FERRY_ENOMEM;
    if (rc == 0 && fread(b, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        rc = base_errf(why, whylen, FERRY_EIO, "cannot read it");
    fclose(f);
    if (rc) {
        free(b);
        return rc;
    }
    b[st.st_size] = '\0';
    *out = b;
    *len = (size_t)st.st_size;
    return 0;
}

/* One "KEY VALUE" line's value into its field. */
static int parse_value(rt_ckpt_head *h, const char *key, char *v)
{
    char *end = NULL;
    errno = 0;
#define GET_U64(field) (h->field = strtoull(v, &end, 10))
#define GET_I64(field) (h->field = strtoll(v, &end, 10))
#define GET_F64(field) (h->field = strtod(v, &end))
#define GET_TXT(field) (h->field = v, end = v + strlen(v))
#define GET(type, field, meaning)                                                        \
    if (strcmp(key, #field) == 0) {                                                      \
        GET_##type(field);                                                               \
        return errno || end == v || *end ? FERRY_ECORRUPT : 0;                           \
    }
    RT_CKPT_FIELDS(GET)
    RT_CKPT_ASYNC_FIELDS(GET)
#undef GET
    return 0; /* a key a later ferry added */
}

/* Splits the header's lines (in place: each ends at its NUL) into f->h. */
static int parse_head(rt_ckpt_file *f, char *text, char *why, size_t whylen)
{
    char *line = text + strlen(RT_CKPT_MAGIC);
    for (char *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        if (strcmp(line, "end") == 0)
            break;
        char *sp = strchr(line, ' ');
        if (!sp)
            return base_errf(why, whylen, FERRY_ECORRUPT,
                             "its header line '%.40s' has no value", line);
        *sp = '\0';
        if (parse_value(&f->h, line, sp + 1))
            return base_errf(why, whylen, FERRY_ECORRUPT, "its header's %s is '%.40s'",
                             line, sp + 1);
        *sp = ' ';
    }
    if (!f->h.model || !f->h.optimizer || !f->h.ferry_version)
        return base_errf(why, whylen, FERRY_ECORRUPT, "its header names no model");
    bool v2 = text[strlen(RT_CKPT_MAGIC) - 2] == '2';
    if (v2 != (f->h.shards > 0) || f->h.shard < 0 || f->h.shard >= f->h.shards + !v2 ||
        f->h.shard_lo > f->h.shard_hi)
        return base_errf(why, whylen, FERRY_ECORRUPT,
                         "its header's shard %" PRId64 " of %" PRId64
                         " is not version %c's",
                         f->h.shard, f->h.shards, v2 ? '2' : '1');
    return 0;
}

int rt_ckpt_read(const char *path, rt_ckpt_file *f, char *why, size_t whylen)
{
    memset(f, 0, sizeof *f);
    size_t len = 0;
    int rc = slurp(path, &f->buf, &len, why, whylen);
    if (rc)
        return rc;
    uint8_t *b = f->buf;
    size_t ml = strlen(RT_CKPT_MAGIC);
    if (len < ml ||
        (memcmp(b, RT_CKPT_MAGIC, ml) != 0 && memcmp(b, RT_CKPT_MAGIC2, ml) != 0)) {
        rc = base_errf(why, whylen, FERRY_ECORRUPT, "not a ferry checkpoint");
        goto fail;
    }
    if (len < TRAILER_LEN + ml || memcmp(b + len - TRAILER_LEN, "sha256 ", 7) != 0 ||
        b[len - 1] != '\n') {
        rc = base_errf(why, whylen, FERRY_ECORRUPT,
                       "truncated (%zu bytes, no checksum at its end)", len);
        goto fail;
    }
    size_t body = len - TRAILER_LEN;
    char hex[RT_SHA256_HEX];
    rt_sha256_hex(b, body, hex);
    if (memcmp(hex, b + body + 7, 64) != 0) {
        rc = base_errf(why, whylen, FERRY_ECORRUPT,
                       "its checksum does not match its bytes (altered or cut short)");
        goto fail;
    }
    memcpy(f->sha256, hex, sizeof f->sha256);
    /* Checked: the bytes are the ones written. */
    uint8_t *end = NULL;
    size_t limit = body < RT_CKPT_MAX_HEADER ? body : RT_CKPT_MAX_HEADER;
    for (size_t i = ml; i + 4 <= limit && !end; i++)
        if (b[i - 1] == '\n' && memcmp(b + i, "end\n", 4) == 0)
            end = b + i;
    if (!end) {
        rc = base_errf(why, whylen, FERRY_ECORRUPT, "its header has no end");
        goto fail;
    }
    size_t tlen = (size_t)(end - b) + 4;
    char *text = malloc(tlen + 1);
    if (!text) {
        rc = FERRY_ENOMEM;
        goto fail;
    }
    memcpy(text, b, tlen);
    text[tlen] = '\0';
    /* Two copies: one split into the fields' strings, one to print. */
    char *shown = malloc(tlen + 1);
    if (!shown) {
        free(text);
        rc = FERRY_ENOMEM;
        goto fail;
    }
    memcpy(shown, text, tlen + 1);
    f->text = shown;
    f->parsed = text;
    rc = parse_head(f, text, why, whylen);
    if (rc == 0 && tlen + f->h.state_bytes + f->h.optim_bytes != body)
        rc = base_errf(why, whylen, FERRY_ECORRUPT,
                       "its sections say %" PRIu64 " + %" PRIu64 " bytes, it holds %zu",
                       f->h.state_bytes, f->h.optim_bytes, body - tlen);
    f->state = b + tlen;
    f->optim = f->state + f->h.state_bytes;
    if (rc == 0)
        return 0;
    rt_ckpt_file_free(f);
    return rc;
fail:
    free(f->buf);
    memset(f, 0, sizeof *f);
    return rc;
}

void rt_ckpt_file_free(rt_ckpt_file *f)
{
    free(f->parsed);
    free((void *)f->text);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

int rt_ckpt_parse_every(const char *s, uint64_t *steps, double *secs)
{
    *steps = 0;
    *secs = 0;
    if (!s || !*s)
        return 0;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    bool in_s = end && strcmp(end, "s") == 0;
    if (errno || end == s || (*end && !in_s) || !(v >= 1) || v > 1e9 ||
        (!in_s && v != (double)(uint64_t)v))
        return FERRY_EINVAL;
    if (in_s)
        *secs = v;
    else
        *steps = (uint64_t)v;
    return 0;
}

void rt_ckpt_name(uint64_t steps, char *buf, size_t len)
{
    snprintf(buf, len, RT_CKPT_PREFIX "%012" PRIu64 RT_CKPT_SUFFIX, steps);
}

bool rt_ckpt_is_name(const char *name)
{
    size_t n = strlen(name), p = strlen(RT_CKPT_PREFIX), s = strlen(RT_CKPT_SUFFIX);
    return n > p + s && strncmp(name, RT_CKPT_PREFIX, p) == 0 &&
           strcmp(name + n - s, RT_CKPT_SUFFIX) == 0 &&
           !rt_ckpt_is_shard_name(name, NULL, NULL, NULL);
}

void rt_ckpt_shard_name(uint64_t steps, int shard, int shards, char *buf, size_t len)
{
    snprintf(buf, len, RT_CKPT_PREFIX "%012" PRIu64 ".shard-%04d-of-%04d" RT_CKPT_SUFFIX,
             steps, shard, shards);
}

bool rt_ckpt_is_shard_name(const char *name, uint64_t *steps, int *shard, int *shards)
{
    unsigned long long st;
    int a, b, used = -1;
    if (sscanf(name, RT_CKPT_PREFIX "%12llu.shard-%4d-of-%4d" RT_CKPT_SUFFIX "%n", &st,
               &a, &b, &used) != 3 ||
        used < 0 || name[used] || a < 0 || b < 1 || a >= b)
        return false;
    char canon[96];
    rt_ckpt_shard_name(st, a, b, canon, sizeof canon);
    if (strcmp(canon, name) != 0)
        return false;
    if (steps)
        *steps = st;
    if (shard)
        *shard = a;
    if (shards)
        *shards = b;
    return true;
}

static bool is_shard(const char *name)
{
    return rt_ckpt_is_shard_name(name, NULL, NULL, NULL);
}

static int newest_first(const void *a, const void *b)
{
    return -strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_where(const char *dir, char ***names, bool (*want)(const char *));

int rt_ckpt_list(const char *dir, char ***names)
{
    return list_where(dir, names, rt_ckpt_is_name);
}

int rt_ckpt_list_shards(const char *dir, char ***names)
{
    return list_where(dir, names, is_shard);
}

static int list_where(const char *dir, char ***names, bool (*want)(const char *))
{
    *names = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int n = 0, cap = 0;
    char **v = NULL;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!want(e->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = realloc(v, (size_t)cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        if (!(v[n] = strdup(e->d_name)))
            break;
        n++;
    }
    bool short_of_memory = e != NULL;
    closedir(d);
    if (short_of_memory) {
        rt_ckpt_names_free(v, n);
        return -ENOMEM;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, newest_first);
    *names = v;
    return n;
}

void rt_ckpt_names_free(char **names, int n)
{
    for (int i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}
