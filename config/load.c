/* Reading a cluster file with inih, every mistake as "PATH:LINE: ...".
 *
 * inih hands the handler a section, key and value, but not the line, and
 * reports lines it cannot parse only by number once it is done. So the file
 * is fed to inih through our own reader, which counts lines, checks section
 * headers, keeps the current line's text for messages and stops the parse
 * at the first mistake; the handler checks keys and values. The result is
 * built in a copy and replaces the caller's only when the whole file is
 * good. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <ini.h>

#include "config_int.h"

enum kind { K_HOST, K_PATH, K_INT, K_I64 };

typedef struct key {
    const char *section;
    const char *name;
    enum kind kind;
    size_t off;
    int64_t min, max;
    const char *what; /* "a whole number of milliseconds" */
} key;

#define MS_MAX   INT32_MAX
#define WEDGE_MS_MAX (INT64_C(24) * 3600 * 1000) /* the worker's --wedge-grace-ms bound */
#define FIELD(f) offsetof(conf_cluster, f)

static const key KEYS[] = {
    {"cluster", "listen", K_HOST, FIELD(listen), 0, 0, "a host name or address"},
    {"cluster", "base_port", K_INT, FIELD(base_port), 0, 65535, "a port number"},
    {"cluster", "token_file", K_PATH, FIELD(token_file), 0, 0, "a file name"},
    {"cluster", "call_timeout_ms", K_I64, FIELD(call_timeout_ms), 1, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "ping_timeout_ms", K_I64, FIELD(ping_timeout_ms), 1, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "heartbeat_ms", K_I64, FIELD(heartbeat_ms), 0, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "start_timeout_ms", K_I64, FIELD(start_timeout_ms), 1, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "shutdown_grace_ms", K_I64, FIELD(shutdown_grace_ms), 0, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "threads", K_INT, FIELD(threads), 0, 1024, "a number of threads"},
    {"cluster", "liveness_timeout_ms", K_I64, FIELD(liveness_timeout_ms), 0, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "restart_backoff_ms", K_I64, FIELD(restart_backoff_ms), 1, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "restart_backoff_max_ms", K_I64, FIELD(restart_backoff_max_ms), 1, MS_MAX,
     "a whole number of milliseconds"},
    {"cluster", "max_message_bytes", K_I64, FIELD(max_message_bytes),
     CONF_MIN_BYTES_LIMIT, CONF_MAX_BYTES_LIMIT, "a number of bytes"},
    {"cluster", "max_module_bytes", K_I64, FIELD(max_module_bytes), 4096,
     CONF_MAX_BYTES_LIMIT, "a number of bytes"},
    {"cluster", "log_max_bytes", K_I64, FIELD(log_max_bytes), 4096, INT64_C(1) << 40,
     "a number of bytes"},
    {"cluster", "log_keep", K_INT, FIELD(log_keep), 0, 100, "a number of old logs"},
    {"cluster", "wedge_grace_ms", K_I64, FIELD(wedge_grace_ms), 0, WEDGE_MS_MAX,
     "a whole number of milliseconds up to a day"},
    {"cluster", "metrics_port", K_INT, FIELD(metrics_port), 0, 65535, "a port number"},
    {"cluster", "stall_warn_ms", K_I64, FIELD(stall_warn_ms), 0, WEDGE_MS_MAX,
     "a whole number of milliseconds up to a day"},
    {"cluster", "stall_abort_ms", K_I64, FIELD(stall_abort_ms), 0, WEDGE_MS_MAX,
     "a whole number of milliseconds up to a day"},
    {"cluster", "tls_cert", K_PATH, FIELD(tls_cert), 0, 0, "a file name"},
    {"cluster", "tls_key", K_PATH, FIELD(tls_key), 0, 0, "a file name"},
    {"cluster", "tls_ca", K_PATH, FIELD(tls_ca), 0, 0, "a file name"},
    {"cluster", "insecure", K_INT, FIELD(insecure), 0, 1, "a flag"},
    {"state", "supervisor_pid", K_INT, FIELD(supervisor_pid), 1, INT32_MAX,
     "a process id"},
};
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

static const char *const SECTIONS[] = {"cluster", "workers", "state"};
#define N_SECTIONS (sizeof SECTIONS / sizeof SECTIONS[0])

typedef struct parse {
    const char *path;
    FILE *f;
    conf_cluster next;
    int line;                    /* of the text inih is working on */
    char text[INI_MAX_LINE + 8]; /* that line, as read */
    bool expect_call;            /* that line is "key = value" for inih */
    bool called;                 /* ... and the handler ran for it */
    int key_line[N_KEYS];        /* where each key was set; 0: not yet */
    int *worker_line;            /* where each of next.workers was listed */
    bool file_workers;           /* next.workers came from this file */
    int err_line;                /* 0: no mistake yet */
    char err[CONF_ERR_LEN];
} parse;

static int fail(parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(parse *p, const char *fmt, ...)
{
    if (p->err_line)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    p->err_line = p->line;
    return 0;
}

static void strip_newline(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

static bool known_section(const char *s, size_t n)
{
    for (size_t i = 0; i < N_SECTIONS; i++)
        if (strlen(SECTIONS[i]) == n && memcmp(SECTIONS[i], s, n) == 0)
            return true;
    return false;
}

/* inih gives a line it cannot parse no callback; it is seen here when the
 * next one is asked for (or the file ends) and the handler did not run. */
static void check_previous(parse *p)
{
    if (p->expect_call && !p->called)
        fail(p, "expected 'key = value', '[section]' or a comment, got '%s'", p->text);
    p->expect_call = false;
    p->called = false;
}

/* A section header: the name must be known and nothing but a comment may
 * follow it (inih would drop the rest silently). */
static void check_section(parse *p, const char *s)
{
    const char *close = strchr(s, ']');
    if (!close) {
        fail(p, "expected ']' to close the section name, got '%s'", s);
        return;
    }
    const char *rest = close + 1;
    rest += strspn(rest, " \t\r\n");
    if (*rest && *rest != ';' && *rest != '#') {
        fail(p, "unexpected text after the section name, got '%s'", s);
        return;
    }
    size_t n = (size_t)(close - s - 1);
    if (!known_section(s + 1, n))
        fail(p, "unknown section [%.*s] (known: [cluster], [workers], [state])", (int)n,
             s + 1);
}

static char *reader(char *str, int num, void *user)
{
    parse *p = user;
    check_previous(p);
    if (p->err_line || !fgets(str, num, p->f))
        return NULL;
    p->line++;
    size_t n = strlen(str);
    if (n && str[n - 1] != '\n' && !feof(p->f)) {
        int ch = fgetc(p->f);
        if (ch != '\n' && ch != EOF) {
            fail(p, "line is longer than %d characters", num - 1);
            return NULL;
        }
    }
    /* A UTF-8 byte order mark is no part of the first line's text. */
    size_t skip = p->line == 1 && n >= 3 && memcmp(str, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    /* inih reads an indented line as the continuation of the previous
     * value; here indentation means nothing, as a user would expect. */
    skip += strspn(str + skip, " \t");
    memmove(str, str + skip, n - skip + 1);
    snprintf(p->text, sizeof p->text, "%s", str);
    strip_newline(p->text);
    char c0 = p->text[0];
    if (c0 == '[')
        check_section(p, p->text);
    else
        p->expect_call = c0 != '\0' && c0 != ';' && c0 != '#';
    return p->err_line ? NULL : str;
}

static const char *known_keys(const char *section, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_KEYS && used < len; i++) {
        if (strcmp(KEYS[i].section, section) != 0)
            continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", KEYS[i].name);
        if (n > 0)
            used += (size_t)n;
    }
    return buf;
}

static int number(parse *p, const key *k, const char *value)
{
    char *end;
    const char *digits = value[0] == '-' ? value + 1 : value;
    bool whole = *digits && strspn(digits, "0123456789") == strlen(digits);
    errno = 0;
    long long v = whole ? strtoll(value, &end, 10) : 0;
    /* Past the range of long long is past any key's range: say which end. */
    if (whole && errno == ERANGE)
        v = value[0] == '-' ? LLONG_MIN : LLONG_MAX;
    if (!whole || v < k->min || v > k->max) {
        if (k->max < MS_MAX)
            return fail(p, "%s: expected %s from %" PRId64 " to %" PRId64 ", got '%s'",
                        k->name, k->what, k->min, k->max, value);
        if (whole && v > k->max)
            return fail(p, "%s: expected %s <= %" PRId64 ", got '%s'", k->name, k->what,
                        k->max, value);
        return fail(p, "%s: expected %s >= %" PRId64 ", got '%s'", k->name, k->what,
                    k->min, value);
    }
    char *field = (char *)&p->next + k->off;
    if (k->kind == K_INT)
        *(int *)field = (int)v;
    else
        *(int64_t *)field = v;
    return 1;
}

/* A relative token_file (or tls_* file) names a file beside the cluster file, wherever
 * the command that reads it runs; it is made absolute so that a daemon that changes
 * directory still finds it. */
static int resolve_path(parse *p, const char *value, char **out)
{
    char *copy = strdup(p->path);
    if (!copy)
        return FERRY_ENOMEM;
    int rc = conf_absolute_path(dirname(copy), value, out);
    free(copy);
    return rc;
}

static int string(parse *p, const key *k, const char *value)
{
    char *s = NULL;
    if (k->kind == K_HOST) {
        if (!conf_valid_host(value))
            return fail(p, "%s: expected %s, got '%s'", k->name, k->what, value);
        s = strdup(value);
    } else {
        if (!*value)
            return fail(p, "%s: expected %s, got ''", k->name, k->what);
        if (resolve_path(p, value, &s))
            return fail(p, "%s: cannot make '%s' absolute", k->name, value);
    }
    if (!s)
        return fail(p, "out of memory");
    char **field = (char **)((char *)&p->next + k->off);
    free(*field);
    *field = s;
    return 1;
}

/* One worker of a [workers] line; `value` is the line's, for messages. */
static int add_worker(parse *p, const char *name, const char *value, const char *address)
{
    char why[CONF_ERR_LEN - 64];
    char host[CONF_HOST_MAX + 1];
    int port;
    if (conf_parse_address(address, host, sizeof host, &port, 1, why, sizeof why))
        return fail(p, "%s: %s", name, why);
    for (size_t i = 0; i < p->next.n_workers; i++) {
        const conf_worker *w = &p->next.workers[i];
        if (w->port == port && strcasecmp(w->host, host) == 0) {
            if (strcmp(address, value) == 0)
                return fail(p,
                            "duplicate worker '%s' (already listed on line %d as '%s')",
                            value, p->worker_line[i], w->address);
            return fail(p,
                        "duplicate worker '%s' of '%s' (already listed on line %d as "
                        "'%s')",
                        address, value, p->worker_line[i], w->address);
        }
    }
    int *lines = realloc(p->worker_line, (p->next.n_workers + 1) * sizeof *lines);
    if (!lines)
        return fail(p, "out of memory");
    p->worker_line = lines;
    lines[p->next.n_workers] = p->line;
    if (conf_add_worker(&p->next, address, why, sizeof why))
        return fail(p, "%s: %s", name, why);
    p->next.workers[p->next.n_workers - 1].attach = strcmp(name, "attach") == 0;
    p->next.workers[p->next.n_workers - 1].line = p->line;
    return 1;
}

static int worker(parse *p, const char *name, const char *value)
{
    char why[CONF_ERR_LEN - 64];
    if (!p->file_workers) {
        /* The file's [workers] is the whole list: it replaces, not extends,
         * the one the caller had. */
        for (size_t i = 0; i < p->next.n_workers; i++) {
            free(p->next.workers[i].address);
            free(p->next.workers[i].host);
        }
        free(p->next.workers);
        p->next.workers = NULL;
        p->next.n_workers = 0;
        p->file_workers = true;
    }
    /* A host list ("n[1-4]:7100") is one worker a host, all on this line. */
    conf_hosts addresses;
    if (conf_worker_addresses(value, &addresses, why, sizeof why))
        return fail(p, "%s: %s", name, why);
    int ok = 1;
    for (size_t i = 0; i < addresses.n && ok; i++)
        ok = add_worker(p, name, value, addresses.names[i]);
    conf_hosts_fini(&addresses);
    return ok;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    parse *p = user;
    char known[512];
    p->called = true;
    if (p->err_line)
        return 0;
    if (!*section)
        return fail(p,
                    "key '%s' before any section (expected [cluster], [workers] or "
                    "[state] first)",
                    name);
    if (strcmp(section, "workers") == 0) {
        if (strcmp(name, "worker") != 0 && strcmp(name, "attach") != 0)
            return fail(p, "unknown key '%s' in [workers] (known: worker, attach)", name);
        return worker(p, name, value);
    }
    for (size_t i = 0; i < N_KEYS; i++) {
        const key *k = &KEYS[i];
        if (strcmp(k->section, section) != 0 || strcmp(k->name, name) != 0)
            continue;
        if (p->key_line[i])
            return fail(p, "duplicate key '%s' in [%s] (first set on line %d)", name,
                        section, p->key_line[i]);
        p->key_line[i] = p->line;
        return k->kind == K_HOST || k->kind == K_PATH ? string(p, k, value)
                                                      : number(p, k, value);
    }
    return fail(p, "unknown key '%s' in [%s] (known: %s)", name, section,
                known_keys(section, known, sizeof known));
}

bool conf_values_valid(const conf_cluster *c)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        const key *k = &KEYS[i];
        const char *field = (const char *)c + k->off;
        int64_t v;
        if (k->kind == K_INT)
            v = *(const int *)field;
        else if (k->kind == K_I64)
            v = *(const int64_t *)field;
        else
            continue;
        /* [state] is written only when there is a supervisor. */
        if (k->off == FIELD(supervisor_pid) && v == 0)
            continue;
        if (v < k->min || v > k->max)
            return false;
    }
    return !c->listen || conf_valid_host(c->listen);
}

int conf_load(conf_cluster *c, const char *path, char *err, size_t errlen)
{
    parse *p = calloc(1, sizeof *p);
    if (!p)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: out of memory", path);
    p->path = path;
    int rc = 0;
    p->f = fopen(path, "re");
    if (!p->f) {
        int e = errno;
        rc = base_errf(err, errlen, e == ENOENT ? FERRY_ENOENT : -e, "%s: %s", path,
                       strerror(e));
        goto out;
    }
    if (conf_copy(&p->next, c)) {
        rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    int line = ini_parse_stream(reader, p, handler, p);
    if (!p->err_line && ferror(p->f)) {
        rc = base_errf(err, errlen, FERRY_EIO, "%s:%d: read error", path, p->line);
        goto out;
    }
    if (!p->err_line && line > 0) {
        /* Not expected: every line inih refuses is caught above. */
        p->err_line = line;
        snprintf(p->err, sizeof p->err, "cannot parse this line");
    }
    if (p->err_line) {
        rc = base_errf(err, errlen, FERRY_EINVAL, "%s:%d: %s", path, p->err_line, p->err);
        goto out;
    }
    conf_fini(c);
    *c = p->next;
    memset(&p->next, 0, sizeof p->next);
out:
    conf_fini(&p->next);
    if (p->f)
        fclose(p->f);
    free(p->worker_line);
    free(p);
    return rc;
}
