/* A shard's state as a checkpoint keeps it, and a shard started again from
 * one: its values, its optimizer's moments and steps, its version and the
 * samples it has taken. The ranks' clocks are not kept: a continued run's
 * ranks count their local steps from 0 again. */
#include <stdlib.h>
#include <string.h>

#include "ps_int.h"

static float *dup_floats(const float *src, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (p && n)
        memcpy(p, src, n * sizeof *p);
    return p;
}

int rt_shard_snapshot(rt_shard *sh, rt_ps_shard_state *out)
{
    memset(out, 0, sizeof *out);
    size_t len = sh->span.hi - sh->span.lo;
    rt_optim_state os = {0};
    pthread_mutex_lock(&sh->mu);
    if (sh->opt)
        rt_optim_state_of(sh->opt, &os);
    *out = (rt_ps_shard_state){.index = sh->index,
                               .shards = sh->sess->shards,
                               .lo = sh->span.lo,
                               .hi = sh->span.hi,
                               .values = dup_floats(sh->values, len),
                               .m = os.m ? dup_floats(os.m, len) : NULL,
                               .v = os.v ? dup_floats(os.v, len) : NULL,
                               .t = os.t,
                               .version = sh->version,
                               .samples = sh->samples};
    pthread_mutex_unlock(&sh->mu);
    if (!out->values || (os.m && !out->m) || (os.v && !out->v)) {
        rt_ps_shard_state_free(out);
        return FERRY_ENOMEM;
    }
    return 0;
}

int rt_shard_restore(rt_shard *sh, const rt_ps_shard_state *from)
{
    size_t len = sh->span.hi - sh->span.lo;
    rt_optim_state os = {0};
    if (sh->opt)
        rt_optim_state_of(sh->opt, &os);
    if (from->lo != sh->span.lo || from->hi != sh->span.hi || !from->values ||
        (os.m != NULL) != (from->m != NULL) || (os.v != NULL) != (from->v != NULL))
        return FERRY_EINVAL;
    memcpy(sh->values, from->values, len * sizeof(float));
    if (os.m)
        memcpy(os.m, from->m, len * sizeof(float));
    if (os.v)
        memcpy(os.v, from->v, len * sizeof(float));
    if (sh->opt)
        rt_optim_set_steps(sh->opt, from->t);
    sh->version = from->version;
    sh->samples = from->samples;
    sh->restored = true;
    return 0;
}

void rt_ps_shard_state_free(rt_ps_shard_state *s)
{
    free(s->values);
    free(s->m);
    free(s->v);
    memset(s, 0, sizeof *s);
}
