/* bench/allreduce — a baseline's processes, and the lines it prints. */
#include "allreduce_ext.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"
#include "train_child.h"
#include "watch.h"

typedef struct reading {
    const ar_plan *plan;
    double *busbw;
    char *why;
    size_t len;
} reading;

/* One line of the baseline's stdout: JSON lines go through to ours. */
static void take_line(void *arg, int stream, char *line, double t_s)
{
    reading *r = arg;
    (void)stream, (void)t_s;
    if (line[0] != '{') {
        if (line[0])
            bench_log("  | %s", line);
        return;
    }
    if (strstr(line, "\"skipped\"")) {
        bench_json_string(line, "skipped", r->why, r->len);
        return;
    }
    puts(line);
    fflush(stdout);
    char metric[32];
    bench_json_string(line, "metric", metric, sizeof metric);
    if (strcmp(metric, "busbw") != 0)
        return;
    double bytes = bench_json_number(line, "bytes");
    for (int s = 0; s < r->plan->n; s++)
        if ((double)r->plan->step[s].bytes == bytes)
            r->busbw[s] = bench_json_number(line, "value");
}

int ar_ext_run(char *const argv[], const char *const *env, int deadline_s,
               const ar_plan *plan, double busbw[AR_MAX_SIZES], char *why, size_t len)
{
    why[0] = '\0';
    for (int s = 0; s < AR_MAX_SIZES; s++)
        busbw[s] = NAN;
    if (access(argv[0], X_OK) != 0) {
        snprintf(why, len, "no %s: %s", argv[0], strerror(errno));
        return -1;
    }
    reading r = {plan, busbw, why, len};
    int code = bench_watch(argv, env, BENCH_WATCH_OUT, deadline_s, take_line, &r);
    if (why[0])
        return -1; /* the baseline's own reason */
    if (code < 0)
        snprintf(why, len, "cannot start %s: %s", argv[0], strerror(errno));
    else if (code == 124)
        snprintf(why, len, "%s did not finish within %d s", argv[0], deadline_s);
    else if (code != 0)
        snprintf(why, len, "%s exited %d", argv[0], code);
    if (code != 0)
        return -1;
    for (int s = 0; s < plan->n; s++) {
        if (isnan(busbw[s])) {
            snprintf(why, len, "%s printed no busbw for %zu bytes", argv[0],
                     plan->step[s].bytes);
            return -1;
        }
    }
    return 0;
}

void ar_json_safe(char *dst, size_t len, const char *src)
{
    size_t n = 0;
    for (; src[n] && n + 1 < len; n++)
        dst[n] = src[n] == '"' || src[n] == '\\' || (unsigned char)src[n] < 0x20 ? '\''
                                                                                 : src[n];
    dst[n] = '\0';
}
