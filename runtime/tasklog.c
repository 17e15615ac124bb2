/* A call's log lines, kept for its reply so that the submitter sees what a
 * task logged (as Ray streams a worker's output to its driver), bounded so
 * that a task logging in a loop costs the reply a fixed amount.
 *
 * Each line is made safe for a terminal here: control characters (an
 * escape sequence, a carriage return, a newline inside the text) become
 * spaces, so a line can neither rewrite the user's screen nor pass for two;
 * and safe for the wire: a byte that is not part of valid UTF-8 (which a
 * protobuf string must be, for other clients' parsers) becomes '?'.
 * The lines beyond the bound are counted; the count travels as the list's
 * last entry, RT_TASKLOG_DROPPED followed by the decimal count, which no
 * line can begin with (see proto/ferry.proto's CallReply.log). */
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "runtime_int.h"

void rt_tasklog_init(rt_tasklog *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
}

/* A line past the bound goes to the tail, whose oldest it replaces. */
static void keep_tail(rt_tasklog *l, char *line)
{
    if (l->tail_n < RT_TASKLOG_TAIL) {
        l->tail[l->tail_n++] = line;
        return;
    }
    free(l->tail[l->tail_at]);
    l->tail[l->tail_at] = line;
    l->tail_at = (l->tail_at + 1) % RT_TASKLOG_TAIL;
    l->dropped++;
}

static void keep(rt_tasklog *l, char *line, size_t len)
{
    if (l->n == RT_TASKLOG_LINES || l->bytes + len > RT_TASKLOG_BYTES) {
        keep_tail(l, line);
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **more = realloc(l->lines, (cap + 1) * sizeof *more);
        if (!more) {
            l->dropped++;
            free(line);
            return;
        }
        l->lines = more;
        l->cap = cap;
    }
    l->lines[l->n++] = line;
    l->bytes += len;
}

static locale_t utf8;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_open(void)
{
    utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/* text[0..len) into out (len + 1 bytes), made safe as said above; glibc's
 * decoder judges what is UTF-8. */
static void make_safe(const char *text, size_t len, char *out)
{
    pthread_once(&utf8_once, utf8_open);
    locale_t was = utf8 ? uselocale(utf8) : (locale_t)0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)text[i];
        size_t n = c < 0x80 || !utf8 ? 1 : mbrtowc(NULL, text + i, len - i, &st);
        if (c < 0x80 || (utf8 && n != (size_t)-1 && n != (size_t)-2 && n != 0)) {
            for (size_t k = 0; k < n; k++, i++)
                out[i] = c < 0x20 || c == 0x7f ? ' ' : text[i];
        } else {
            memset(&st, 0, sizeof st);
            out[i++] = '?';
        }
    }
    out[len] = '\0';
    if (utf8)
        uselocale(was);
}

void rt_tasklog_add(rt_tasklog *l, const char *text)
{
    size_t len = strnlen(text, RT_TASKLOG_LINE_MAX);
    char *line = malloc(len + 1);
    if (line)
        make_safe(text, len, line);
    pthread_mutex_lock(&l->mu);
    if (!line)
        l->dropped++;
    else
        keep(l, line, len);
    pthread_mutex_unlock(&l->mu);
}

size_t rt_tasklog_list(rt_tasklog *l, char ***lines)
{
    /* Every growth of the list reserved a slot for the count; a list that
     * never grew (each line refused for want of memory) gets its one. The
     * tail is not sent with a reply: counted. */
    uint64_t dropped = l->dropped + l->tail_n;
    if (dropped && !l->lines)
        l->lines = malloc(sizeof *l->lines);
    if (dropped && l->lines) {
        char count[32];
        snprintf(count, sizeof count, "%c%llu", RT_TASKLOG_DROPPED,
                 (unsigned long long)dropped);
        char *c = strdup(count);
        if (c)
            l->lines[l->n++] = c;
        l->dropped = 0;
    }
    *lines = l->lines;
    return l->n;
}

/* Line i of all those kept, in the order logged: the list, then the tail. */
static char *line_at(const rt_tasklog *l, size_t i)
{
    if (i < l->n)
        return l->lines[i];
    i -= l->n;
    return l->tail[l->tail_n < RT_TASKLOG_TAIL ? i : (l->tail_at + i) % RT_TASKLOG_TAIL];
}

int rt_tasklog_pack_tail(rt_tasklog *l, size_t max, proto_bytes *out)
{
    memset(out, 0, sizeof *out);
    /* A string costs its length, a tag byte and a length of up to two
     * (RT_TASKLOG_LINE_MAX); 32 bytes stay for the count. The lines
     * skipped between the list and the tail are counted in l->dropped. */
    size_t all = l->n + l->tail_n, first = all, used = 32;
    while (first > 0 && used + strlen(line_at(l, first - 1)) + 3 <= max)
        used += strlen(line_at(l, --first)) + 3;
    uint64_t dropped = l->dropped + first;
    if (all == first && !dropped)
        return 0;
    char count[32];
    snprintf(count, sizeof count, "%c%llu", RT_TASKLOG_DROPPED,
             (unsigned long long)dropped);
    size_t k = 0;
    char **tail = malloc((all - first + 1) * sizeof *tail);
    if (!tail)
        return FERRY_ENOMEM;
    for (size_t i = first; i < all; i++)
        tail[k++] = line_at(l, i);
    if (dropped)
        tail[k++] = count;
    proto_call_reply r = {.log_lines = tail, .n_log_lines = k};
    int rc = proto_call_reply_pack(&r, out);
    free(tail);
    return rc;
}

void rt_tasklog_fini(rt_tasklog *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->lines[i]);
    for (size_t i = 0; i < l->tail_n; i++)
        free(l->tail[i]);
    free(l->lines);
    pthread_mutex_destroy(&l->mu);
    memset(l, 0, sizeof *l);
}

/* The log of the call this thread runs, for what logs without a call's
 * context in hand (a model's mc->ops->log during ferry.train.*). */
static _Thread_local rt_tasklog *running;

void rt_tasklog_bind(rt_tasklog *l)
{
    running = l;
}

void rt_tasklog_here(const char *line)
{
    if (running)
        rt_tasklog_add(running, line);
}
