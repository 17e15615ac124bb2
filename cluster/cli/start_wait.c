/* What `ferry start` and `ferry start --add` wait for: the ports of
 * workers that pick their own. The wait gives up at its deadline or when
 * the caller's check says why it should. */
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"
#include "cluster/supervisor/supervisor.h"

#define POLL_MS 10

static double now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

int cli_start_wait_ports(const cli_start_wait *w, sv_local *local, size_t n)
{
    for (;;) {
        size_t missing = n; /* the first worker whose port is not known */
        for (size_t i = 0; i < n; i++) {
            if (!local[i].port) {
                char path[CLI_FILE_MAX];
                long port;
                home_worker_file(w->h, local[i].rank, "port", path, sizeof path);
                if (home_read_number(path, 1, 65535, &port))
                    local[i].port = (int)port;
            }
            if (!local[i].port && missing == n)
                missing = i;
        }
        if (missing == n)
            return 0;
        int rc = w->gave_up(w->data);
        if (rc)
            return rc;
        if (now_ms() > w->deadline) {
            cli_err("start",
                    "%sworker %d did not bind a port within the timeout (see %s)",
                    w->what, local[missing].rank, w->h->logs);
            return FERRY_ETIMEDOUT;
        }
        usleep(POLL_MS * 1000);
    }
}
