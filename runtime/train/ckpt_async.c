/* An async run's checkpoints: no rank holds the whole model, so each rank
 * writes the shards it holds, one file a shard (version 2 of the format,
 * ckpt_file.h), named by the global steps the shards had taken when the
 * set was due. Every rank reaches the same names on its own (every N
 * global steps, or each epoch's end), so the set of one name is complete
 * once every holder has written; a rank killed before it did leaves that
 * set short, and a resumed run takes an older one. Each file is written
 * whole (base_write_atomic: fsync of the file and of the directory) after
 * the shard is copied under its mutex: the other ranks' pushes wait for
 * the copy only. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "base/base.h"
#include "checkpoint.h"
#include "ckpt_file.h"

struct rt_ckpt_async {
    char *dir, *model;
    uint64_t every;
    int keep;
};

int rt_ckpt_async_setup(rt_trainer *t, rt_ckpt_async **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!t->o.ckpt_dir || !*t->o.ckpt_dir)
        return 0;
    uint64_t steps;
    double secs;
    if (rt_ckpt_parse_every(t->o.ckpt_every, &steps, &secs) != 0)
        return base_errf(err, errlen, FERRY_EINVAL, "--checkpoint-every '%s': %s",
                         t->o.ckpt_every, RT_CKPT_EVERY_EXPECTED);
    if (secs > 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "--checkpoint-every %s: an async run's ranks write their shards "
                         "every N global steps or at each epoch's end, not by time",
                         t->o.ckpt_every);
    if (mkdir(t->o.ckpt_dir, 0777) != 0 && errno != EEXIST)
        return base_errf(err, errlen, FERRY_EIO,
                         "cannot make the checkpoint directory %s: %s", t->o.ckpt_dir,
                         strerror(errno));
    rt_ckpt_async *c = calloc(1, sizeof *c);
    if (!c)
        return FERRY_ENOMEM;
    c->dir = strdup(t->o.ckpt_dir);
    c->model = strdup(t->o.ckpt_model && *t->o.ckpt_model ? t->o.ckpt_model : "model");
    c->every = steps;
    c->keep = t->o.ckpt_keep > 0 ? t->o.ckpt_keep : 2;
    if (!c->dir || !c->model) {
        rt_ckpt_async_free(c);
        return FERRY_ENOMEM;
    }
    *out = c;
    return 0;
}

uint64_t rt_ckpt_async_every(const rt_ckpt_async *c)
{
    return c ? c->every : 0;
}

void rt_ckpt_async_free(rt_ckpt_async *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c->model);
    free(c);
}

/* This shard's files of the sets older than the newest `keep` whole ones
 * (every shard's file there), and its temporaries left by a writer killed
 * mid-write. A set counted whole stays whole (no holder removes a file of
 * it), so whatever the holders' pace the newest `keep` whole sets remain:
 * a holder that went ahead does not remove the set a slower one still
 * needs to complete an older one. */
static void prune(const rt_ckpt_async *c, int shard, int shards)
{
    char **names;
    int n = rt_ckpt_list_shards(c->dir, &names), whole = 0, in_set = 0;
    uint64_t cutoff = 0, set = UINT64_MAX, st;
    char path[4600];
    for (int i = 0; i < n && whole < c->keep; i++) { /* newest first */
        int a, b;
        if (!rt_ckpt_is_shard_name(names[i], &st, &a, &b) || b != shards)
            continue;
        if (st != set) {
            set = st;
            in_set = 0;
        }
        if (++in_set == shards && ++whole == c->keep)
            cutoff = st;
    }
    for (int i = 0; i < n && cutoff; i++) {
        int a, b;
        if (rt_ckpt_is_shard_name(names[i], &st, &a, &b) && a == shard && b == shards &&
            st < cutoff) {
            snprintf(path, sizeof path, "%s/%s", c->dir, names[i]);
            unlink(path);
        }
    }
    rt_ckpt_names_free(names, n);
    char mine[96], *dot;
    rt_ckpt_shard_name(0, shard, shards, mine, sizeof mine);
    dot = strchr(mine, '.'); /* ".shard-SSSS-of-NNNN.ckpt" */
    DIR *d = opendir(c->dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *at = strstr(e->d_name, dot);
        if (strncmp(e->d_name, RT_CKPT_PREFIX, strlen(RT_CKPT_PREFIX)) == 0 && at &&
            strncmp(at + strlen(dot), ".tmp.", 5) == 0) {
            snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
}

static int write_shard(rt_ckpt_async *c, rt_trainer *t, const rt_ps_shard_state *s,
                       uint64_t steps, int data_epoch, uint64_t data_step, char *err,
                       size_t errlen)
{
    rt_ckpt_head h;
    rt_ckpt_fill_head(t, c->model, &h, 0);
    size_t len = s->hi - s->lo;
    h.steps = steps;
    h.state_floats = len;
    h.state_bytes = len * sizeof(float);
    h.optim_m = s->m != NULL;
    h.optim_v = s->v != NULL;
    h.optim_t = s->t;
    h.optim_bytes = ((size_t)h.optim_m + (size_t)h.optim_v) * len * sizeof(float);
    h.shard = s->index;
    h.shards = s->shards;
    h.shard_lo = s->lo;
    h.shard_hi = s->hi;
    h.shard_version = s->version;
    h.samples = s->samples;
    h.rank = t->o.rank;
    h.data_epoch = data_epoch;
    h.data_step = data_step;
    float *opt = h.optim_bytes ? malloc(h.optim_bytes) : NULL;
    uint8_t *file = NULL;
    size_t flen = 0;
    int rc = h.optim_bytes && !opt ? FERRY_ENOMEM : 0;
    if (rc == 0 && s->m)
        memcpy(opt, s->m, len * sizeof(float));
    if (rc == 0 && s->v)
        memcpy(opt + (s->m ? len : 0), s->v, len * sizeof(float));
    if (rc == 0)
        rc = rt_ckpt_encode(&h, s->values, opt, &file, &flen);
    char name[96], path[4200];
    rt_ckpt_shard_name(steps, s->index, s->shards, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    if (rc == 0)
        rc = base_write_atomic(path, file, flen, true);
    free(opt);
    free(file);
    if (rc)
        return base_errf(err, errlen, rc < 0 ? FERRY_EIO : rc,
                         "cannot write checkpoint %s: %s", path,
                         rc < 0 ? strerror(-rc) : ferry_strerror(rc));
    prune(c, s->index, s->shards);
    return 0;
}

int rt_ckpt_async_write(rt_ckpt_async *c, rt_trainer *t, uint64_t steps, int data_epoch,
                        uint64_t data_step, char *err, size_t errlen)
{
    int rc = 0;
    for (int k = 0; rc == 0; k++) {
        rt_ps_shard_state s;
        rc = rt_ps_snapshot(t->o.ps_store, t->o.session, k, &s);
        if (rc == FERRY_ENOENT)
            return 0; /* every shard held written */
        if (rc == 0)
            rc = write_shard(c, t, &s, steps, data_epoch, data_step, err, errlen);
        rt_ps_shard_state_free(&s);
    }
    return rc;
}

/* One file of the set, read and checked against this run. */
static int read_shard(rt_trainer *t, const char *path, int index, int shards,
                      rt_ckpt_file *f, char *err, size_t errlen)
{
    char why[512];
    int rc = rt_ckpt_read(path, f, why, sizeof why);
    rt_ps_span sp = rt_ps_shard_span(t->plen, shards, index);
    if (rc == 0 && (f->h.shard != index || f->h.shards != shards))
        rc = base_errf(why, sizeof why, FERRY_ECORRUPT,
                       "it says it holds shard %" PRId64 " of %" PRId64, f->h.shard,
                       f->h.shards);
    else if (rc == 0 &&
             (f->h.params != rt_model_param_count(t->m) || f->h.plen != t->plen ||
              f->h.shard_lo != sp.lo || f->h.shard_hi != sp.hi ||
              strcmp(f->h.optimizer, rt_optim_name(t->o.optim.kind))))
        rc = base_errf(why, sizeof why, FERRY_EINVAL,
                       "%" PRIu64 " %s parameters (floats %" PRIu64 "-%" PRIu64
                       "), this run trains %zu with %s (floats %zu-%zu)",
                       f->h.params, f->h.optimizer, f->h.shard_lo, f->h.shard_hi,
                       rt_model_param_count(t->m), rt_optim_name(t->o.optim.kind), sp.lo,
                       sp.hi);
    if (rc)
        base_errf(err, errlen, rc, "cannot continue from %s: %s", path, why);
    return rc;
}

int rt_ckpt_async_load(rt_trainer *t, rt_ckpt_async_start *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *copy = strdup(t->o.resume);
    if (!copy)
        return FERRY_ENOMEM;
    uint64_t steps;
    int any, shards;
    const char *dir = dirname(copy);
    const char *base = strrchr(t->o.resume, '/');
    base = base ? base + 1 : t->o.resume;
    int want = t->o.ps_shards > 0 ? t->o.ps_shards : t->o.world, rc = 0;
    if (!rt_ckpt_is_shard_name(base, &steps, &any, &shards))
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "cannot continue from %s: not an async run's checkpoint",
                       t->o.resume);
    else if (shards != want)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "cannot continue from %s: its run had %d shards, this one has %d "
                       "(--ps-shards)",
                       t->o.resume, shards, want);
    int held = 0;
    for (int i = t->o.rank; rc == 0 && i < shards; i += t->o.world)
        held++;
    out->shards = rc ? NULL : calloc((size_t)(held ? held : 1), sizeof *out->shards);
    if (rc == 0 && !out->shards)
        rc = FERRY_ENOMEM;
    int epoch = -1;
    for (int i = t->o.rank; rc == 0 && i < shards; i += t->o.world) {
        char name[96], path[4200];
        rt_ckpt_shard_name(steps, i, shards, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        rt_ckpt_file f;
        if ((rc = read_shard(t, path, i, shards, &f, err, errlen)))
            break;
        size_t len = f.h.shard_hi - f.h.shard_lo;
        rt_ps_shard_state *s = &out->shards[out->n++];
        *s = (rt_ps_shard_state){
            .index = i,
            .shards = shards,
            .lo = f.h.shard_lo,
            .hi = f.h.shard_hi,
            .values = malloc((len ? len : 1) * sizeof(float)),
            .m = f.h.optim_m ? malloc((len ? len : 1) * sizeof(float)) : NULL,
            .v = f.h.optim_v ? malloc((len ? len : 1) * sizeof(float)) : NULL,
            .t = (int)f.h.optim_t,
            .version = f.h.shard_version,
            .samples = f.h.samples};
        if (!s->values || (f.h.optim_m && !s->m) || (f.h.optim_v && !s->v))
            rc = FERRY_ENOMEM;
        if (rc == 0) {
            memcpy(s->values, f.state, len * sizeof(float));
            if (s->m)
                memcpy(s->m, f.optim, len * sizeof(float));
            if (s->v)
                memcpy(s->v, f.optim + (s->m ? len * sizeof(float) : 0),
                       len * sizeof(float));
        }
        if (epoch < 0 || (int)f.h.epoch < epoch)
            epoch = (int)f.h.epoch;
        if (rc == 0 && f.h.rank == t->o.rank && !out->have_pos) {
            /* This rank's own file: its data position and generator. */
            out->have_pos = true;
            out->data_epoch = (int)f.h.data_epoch;
            out->data_step = f.h.data_step;
            rt_ckpt_restore_rng(t, &f.h);
        }
        rt_ckpt_file_free(&f);
    }
    if (rc == 0 && epoch < 0) { /* this rank holds none of the set's shards */
        rt_ckpt_file f;
        if ((rc = read_shard(t, t->o.resume, any, shards, &f, err, errlen)) == 0)
            epoch = (int)f.h.epoch;
        rt_ckpt_file_free(&f);
    }
    free(copy);
    if (rc) {
        rt_ckpt_async_start_free(out);
        return rc;
    }
    t->epoch = epoch;
    t->steps_done = steps;
    if (!out->have_pos)
        out->data_epoch = t->epoch;
    return 0;
}

void rt_ckpt_async_start_free(rt_ckpt_async_start *s)
{
    for (int i = 0; s->shards && i < s->n; i++)
        rt_ps_shard_state_free(&s->shards[i]);
    free(s->shards);
    memset(s, 0, sizeof *s);
}
