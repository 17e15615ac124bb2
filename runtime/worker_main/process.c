/* What the worker's process sets up before it starts a thread: its
 * descriptor limit and the CPUs it runs on, which every thread inherits. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "config/config.h"
#include "wm_int.h"

void wm_raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

/* Binds the worker to the CPUs of `list` (checked by parse): a local
 * worker's threads then hand work to each other on its own cores, and do
 * not preempt another worker's. A CPU this process may not use is no
 * reason not to serve: it runs unbound. */
void wm_bind_cpus(const char *list)
{
    cpu_set_t set;
    conf_cpus_parse(list, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        fprintf(stderr, "ferry worker: cannot bind to CPUs %s: %s; running unbound\n",
                list, strerror(errno));
}
