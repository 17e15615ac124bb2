/* What the supervisor knows of a worker's crashes, for `ferry status`.
 *
 * While a crash-looping worker waits for its next try nothing answers on
 * its port, so status cannot ask the worker; the supervisor leaves the
 * count, the time span, when it tries again and the last crash in
 * workers/<rank>/restarts. Two lines, written atomically:
 *
 *     <crashes> <window_ms> <next_try_ms since the epoch, 0: at once>
 *     <the last crash, one line>
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "home.h"

int home_restarts_write(const home_paths *h, int rank, const home_restarts *r)
{
    char path[HOME_FILE_MAX], text[HOME_CRASH_MAX + 96];
    home_worker_file(h, rank, "restarts", path, sizeof path);
    int len = snprintf(text, sizeof text, "%d %" PRId64 " %" PRId64 "\n%s\n", r->crashes,
                       r->window_ms, r->next_try_ms, r->last_crash);
    if (len < 0)
        return FERRY_EINVAL;
    if ((size_t)len >= sizeof text)
        len = (int)sizeof text - 1;
    return base_write_atomic(path, text, (size_t)len, false);
}

bool home_restarts_read(const home_paths *h, int rank, home_restarts *r)
{
    char path[HOME_FILE_MAX];
    home_worker_file(h, rank, "restarts", path, sizeof path);
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    bool ok = fscanf(f, "%d %" SCNd64 " %" SCNd64 "\n", &r->crashes, &r->window_ms,
                     &r->next_try_ms) == 3 &&
              fgets(r->last_crash, sizeof r->last_crash, f) != NULL;
    fclose(f);
    r->last_crash[strcspn(r->last_crash, "\n")] = '\0';
    return ok && r->crashes > 0;
}

void home_restarts_describe(const home_restarts *r, int64_t now_ms, char *buf, size_t len)
{
    int64_t wait = r->next_try_ms - now_ms;
    if (wait > 0)
        snprintf(buf, len, "crash loop: %d crashes in %.0f s, next try in %" PRId64 " s",
                 r->crashes, (double)r->window_ms / 1e3, (wait + 999) / 1000);
    else
        snprintf(buf, len, "crash loop: %d crashes in %.0f s, restarting now", r->crashes,
                 (double)r->window_ms / 1e3);
}
