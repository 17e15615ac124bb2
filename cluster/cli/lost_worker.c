/* What `ferry submit` says when a sync run loses a worker and goes on:
 * which worker, how it died (its supervisor's record), where the run was
 * (epoch, step and phase), where every rank continues from, and the last
 * lines its log holds from before its restart
 * (FERRY_HOME/logs/worker-<rank>.log). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Lines of a lost worker's log shown, and how much of its end is read. */
#define TAIL_LINES 5
#define TAIL_BYTES 65536

/* The end of `path`, NUL-terminated (malloc'd), or NULL. */
static char *read_end(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size >= 0 && fseek(f, size > TAIL_BYTES ? size - TAIL_BYTES : 0, SEEK_SET) == 0 &&
        (buf = malloc(TAIL_BYTES + 1))) {
        size_t n = fread(buf, 1, TAIL_BYTES, f);
        buf[n] = '\0';
    }
    fclose(f);
    return buf;
}

/* Prints the last TAIL_LINES lines the lost process (`pid`) left in the
 * log: those after its own "listening on ... (pid N)" line and before the
 * next process's; the log's end when that line is not in what was read. */
static void print_tail(FILE *out, const char *path, int pid)
{
    char *text = read_end(path);
    if (!text)
        return;
    char mark[64];
    snprintf(mark, sizeof mark, "(pid %d)\n", pid);
    char *begin = text, *p = strstr(text, mark);
    if (p)
        begin = p + strlen(mark);
    char *end = strstr(begin, " listening on ");
    if (end)
        while (end > begin && end[-1] != '\n')
            end--;
    else
        end = begin + strlen(begin);
    while (end > begin && end[-1] == '\n')
        end--;
    *end = '\0';
    char *start = end;
    for (int lines = 0; start > begin && lines < TAIL_LINES; lines++) {
        start--;
        while (start > begin && start[-1] != '\n')
            start--;
    }
    if (*start) {
        fprintf(out, "  its log (%s) ended:\n", path);
        for (char *line = strtok(start, "\n"); line; line = strtok(NULL, "\n"))
            fprintf(out, "    | %s\n", line);
    }
    free(text);
}

/* Where the run was when the worker was lost: its step and phase, as the
 * other ranks recorded them. */
static void say_where(FILE *out, const cluster_train_lost *l)
{
    if (!l->step) {
        fprintf(out,
                "lost in epoch %d (its step is not known: no other rank recorded one)",
                l->epoch);
        return;
    }
    fprintf(out, "lost in epoch %d, step %llu, phase %s", l->epoch,
            (unsigned long long)l->step, l->phase[0] ? l->phase : "not recorded");
    if (l->waited)
        fprintf(out, " (the other ranks were waiting there for its part)");
    else
        fprintf(out, " (where the other ranks were)");
}

void cli_say_worker_restarted(FILE *out, const cluster_train_lost *l)
{
    fprintf(out, "worker %d (%s, rank %d) ", l->worker, l->target, l->rank);
    say_where(out, l);
    fprintf(out, ": %s\n", l->how[0] ? l->how : "no crash record (it stopped answering)");
    if (l->back)
        fprintf(out, "  restarted by its supervisor; ");
    else
        fprintf(out,
                "  it did not come back: the run goes on without it on %d worker%s, the "
                "global batch sliced over them; ",
                l->left, l->left == 1 ? "" : "s");
    fprintf(out, "every rank continues from %s (restart %d of at most %d)\n",
            l->from[0] ? l->from : "the start (no checkpoint yet)", l->restart, l->max);
    home_paths h;
    char log[HOME_FILE_MAX];
    if (cli_home_init(&h, "submit") == 0 &&
        (size_t)snprintf(log, sizeof log, "%s/worker-%d.log", h.logs, l->worker) <
            sizeof log)
        print_tail(out, log, l->pid);
    fflush(out);
}

bool cli_shutdown_since(int64_t since_ms)
{
    home_paths h;
    char path[CLI_FILE_MAX];
    long at;
    return cli_home_init(&h, "submit") == 0 &&
           (size_t)snprintf(path, sizeof path, "%s/shutdown-at", h.dir) < sizeof path &&
           home_read_number(path, 1, INT64_MAX, &at) && at >= since_ms;
}
