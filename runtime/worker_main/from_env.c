/* `ferry worker --from-env`: the worker's rank from the engine that
 * started it. What the launcher says about the world and rank 0 is
 * reported; the worker serves at --listen as any other. */
#include <stdio.h>
#include <stdlib.h>

#include "config/config.h"
#include "launch/launch.h"
#include "wm_int.h"

int wm_from_env(wm_options *o, char *const *envp)
{
    if (!o->from_env)
        return -1;
    launch_info li;
    char err[CONF_ERR_LEN];
    if (launch_detect(envp, &li, err, sizeof err) != 0) {
        fprintf(stderr, "ferry worker: %s\n", err);
        return EXIT_FAIL;
    }
    if (o->print) {
        char *json = launch_json(&li);
        if (!json) {
            fputs("ferry worker: out of memory\n", stderr);
            return EXIT_FAIL;
        }
        puts(json);
        free(json);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
    }
    char line[512];
    fprintf(stderr, "ferry worker: %s\n", launch_describe(&li, line, sizeof line));
    o->rank = li.rank;
    o->world_size = li.world_size;
    if (li.port > 0)
        conf_format_address(o->rendezvous, sizeof o->rendezvous, li.host, li.port);
    return -1;
}
