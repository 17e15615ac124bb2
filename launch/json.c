/* What was found, for people (the worker's first log line) and for
 * scripts (`ferry worker --from-env --print`). */
#include <stdio.h>

#include <jansson.h>

#include "launch_int.h"

char *launch_describe(const launch_info *li, char *buf, size_t len)
{
    char where[LAUNCH_HOST_MAX + 32];
    if (li->port)
        conf_format_address(where, sizeof where, li->host, li->port);
    else
        snprintf(where, sizeof where, "%s, no port", li->host);
    snprintf(buf, len, "rank %d of %d from %s (%s, %s); rank 0 at %s (%s)", li->rank,
             li->world_size, launch_kind_title(li->kind), li->rank_from, li->world_from,
             where, li->address_from);
    return buf;
}

char *launch_json(const launch_info *li)
{
    json_t *o = json_pack(
        "{s:s, s:i, s:i, s:o, s:s, s:o, s:s, s:s, s:s}", "launcher",
        launch_kind_name(li->kind), "rank", li->rank, "world_size", li->world_size,
        "local_rank", li->local_rank >= 0 ? json_integer(li->local_rank) : json_null(),
        "host", li->host, "port", li->port ? json_integer(li->port) : json_null(),
        "rank_from", li->rank_from, "world_size_from", li->world_from, "address_from",
        li->address_from);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
