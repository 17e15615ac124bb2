/* A call's log lines, kept for its reply so that the submitter sees what a
 * task logged (as Ray streams a worker's output to its driver), bounded so
 * that a task logging in a loop costs the reply a fixed amount.
 *
 * Each line is made safe for a terminal here: control characters (an
 * escape sequence, a carriage return, a newline inside the text) become
 * spaces, so a line can neither rewrite the user's screen nor pass for two.
 * The lines beyond the bound are counted; the count travels as the list's
 * last entry, RT_TASKLOG_DROPPED followed by the decimal count, which no
 * line can begin with (see proto/ferry.proto's CallReply.log). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_int.h"

void rt_tasklog_init(rt_tasklog *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
}

static void keep(rt_tasklog *l, char *line, size_t len)
{
    if (l->n == RT_TASKLOG_LINES || l->bytes + len > RT_TASKLOG_BYTES) {
        l->dropped++;
        free(line);
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

void rt_tasklog_add(rt_tasklog *l, const char *text)
{
    size_t len = strnlen(text, RT_TASKLOG_LINE_MAX);
    char *line = malloc(len + 1);
    pthread_mutex_lock(&l->mu);
    if (!line) {
        l->dropped++;
    } else {
        for (size_t i = 0; i < len; i++)
            line[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? ' ' : text[i];
        line[len] = '\0';
        keep(l, line, len);
    }
    pthread_mutex_unlock(&l->mu);
}

size_t rt_tasklog_list(rt_tasklog *l, char ***lines)
{
    /* Every growth of the list reserved a slot for the count; a list that
     * never grew (each line refused for want of memory) gets its one. */
    if (l->dropped && !l->lines)
        l->lines = malloc(sizeof *l->lines);
    if (l->dropped && l->lines) {
        char count[32];
        snprintf(count, sizeof count, "%c%llu", RT_TASKLOG_DROPPED,
                 (unsigned long long)l->dropped);
        char *c = strdup(count);
        if (c)
            l->lines[l->n++] = c;
        l->dropped = 0;
    }
    *lines = l->lines;
    return l->n;
}

void rt_tasklog_fini(rt_tasklog *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->lines[i]);
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
