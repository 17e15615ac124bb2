/* A trainer's checkpoints: rank 0 (sync and single mode: every rank holds
 * the same parameters and optimizer, so one copy is the run's) copies its
 * state on the step path and a thread of its own encodes it and writes it
 * whole (base_write_atomic: a temporary file, fsync, rename, fsync of the
 * directory). Only a write that has returned is reported, so that a
 * checkpoint that was reported written survives any crash, the writer's
 * included. The other ranks wait for no more than the copy. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "base/base.h"
#include "checkpoint.h"
#include "ckpt_file.h"
#include "tensors.h"

struct rt_ckpt {
    char *dir, *model;
    uint64_t every_steps; /* 0: not by steps */
    double every_s;       /* 0: not by time */
    int keep;
    char (*mine)[64]; /* the names this run wrote, the last `keep` */
    uint64_t n_mine;
    double last_t;
    bool due; /* at the last step of an epoch: written at its end */
    char written[4160];
    /* The write in flight on `th`: what was copied for it, and how it
     * ended (`finished` set by the thread as it returns). */
    bool busy;
    atomic_bool finished;
    pthread_t th;
    rt_ckpt_head h;
    rt_tensors ts;
    float *opt;
    char path[4160], name[64];
    int rc;
};

/* The state as --save writes it: an 8-byte little-endian header length,
 * the JSON header (padded with spaces to 8 bytes), the float32 values. */
static int safetensors(const rt_tensors *ts, const char *model, uint8_t **out,
                       size_t *len)
{
    json_t *h = json_pack("{s:{s:s, s:s, s:s}}", "__metadata__", "format", "ferry",
                          "model", model, "ferry_version", ferry_version());
    size_t bytes = 0;
    for (size_t i = 0; h && i < ts->n; i++) {
        const uint32_t *sh = ts->shapes + 4 * i;
        json_t *dims = json_array();
        size_t values = 1;
        for (int d = 0; d < 4 && sh[d]; d++) {
            json_array_append_new(dims, json_integer(sh[d]));
            values *= sh[d];
        }
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", dims,
                              "data_offsets", (json_int_t)bytes,
                              (json_int_t)(bytes + values * sizeof(float)));
        bytes += values * sizeof(float);
        if (!e || json_object_set_new(h, ts->names[i], e)) {
            json_decref(h);
            h = NULL;
        }
    }
    char *text = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(h);
    if (!text)
        return FERRY_ENOMEM;
    size_t tl = strlen(text), padded = (tl + 7) / 8 * 8;
    uint8_t *b = malloc(8 + padded + bytes);
    if (!b) {
        free(text);
        return FERRY_ENOMEM;
    }
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(b + 8, text, tl);
    memset(b + 8 + tl, ' ', padded - tl);
    memcpy(b + 8 + padded, ts->values, bytes);
    free(text);
    *out = b;
    *len = 8 + padded + bytes;
    return 0;
}

/* The optimizer's moments, m then v where it keeps them, into *out. */
static int optim_bytes(rt_trainer *t, rt_ckpt_head *h, float **out)
{
    rt_optim_state s;
    rt_optim_state_of(t->opt, &s);
    h->optim_m = s.m != NULL;
    h->optim_v = s.v != NULL;
    h->optim_t = s.t;
    size_t k = (size_t)h->optim_m + (size_t)h->optim_v;
    h->optim_bytes = k * s.n * sizeof(float);
    *out = k ? malloc(h->optim_bytes) : NULL;
    if (k && !*out)
        return FERRY_ENOMEM;
    int rc = 0;
    float *at = *out;
    if (s.m && (rc = t->dev->ops->download(t->dev, at, s.m, s.n * sizeof(float))) == 0)
        at += s.n;
    if (rc == 0 && s.v)
        rc = t->dev->ops->download(t->dev, at, s.v, s.n * sizeof(float));
    return rc;
}

void rt_ckpt_fill_head(const rt_trainer *t, const char *model, rt_ckpt_head *h,
                       uint64_t epoch_step)
{
    const rt_rng *g = t->mc.rng;
    uint64_t spare;
    memcpy(&spare, &g->spare, sizeof spare);
    *h = (rt_ckpt_head){
        .model = (char *)model,
        .ferry_version = (char *)ferry_version(),
        .written = (int64_t)time(NULL),
        .params = rt_model_param_count(t->m),
        .plen = t->plen,
        .epoch = (uint64_t)t->epoch,
        .epoch_step = epoch_step,
        .steps = t->steps_done,
        .seed = t->o.seed,
        .batch = t->o.batch,
        .epochs = t->o.epochs,
        .world = t->o.world,
        .optimizer = (char *)rt_optim_name(t->o.optim.kind),
        .lr = t->o.optim.lr,
        .momentum = t->o.optim.momentum,
        .weight_decay = t->o.optim.weight_decay,
        .cosine = t->o.cosine,
        .rng0 = g->s[0],
        .rng1 = g->s[1],
        .rng2 = g->s[2],
        .rng3 = g->s[3],
        .rng_spare = spare,
        .rng_has_spare = g->has_spare,
    };
}

/* Removes this run's checkpoints but the newest `keep`, and every older
 * one (a run continued in its own directory replaces the ones before it),
 * and the temporary files of writes that never finished (a writer killed
 * mid-write). Files newer than the ones this run wrote are not its own:
 * left as they are. */
static void prune(rt_ckpt *c, const char *just)
{
    snprintf(c->mine[c->n_mine++ % (uint64_t)c->keep], sizeof c->mine[0], "%s", just);
    char path[4600];
    if (c->n_mine >= (uint64_t)c->keep) {
        const char *oldest = c->mine[c->n_mine % (uint64_t)c->keep];
        char **names;
        int n = rt_ckpt_list(c->dir, &names);
        for (int i = 0; i < n; i++) {
            if (strcmp(names[i], oldest) >= 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", c->dir, names[i]);
            unlink(path);
        }
        rt_ckpt_names_free(names, n);
    }
    DIR *d = opendir(c->dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, RT_CKPT_PREFIX, strlen(RT_CKPT_PREFIX)) == 0 &&
            strstr(e->d_name, RT_CKPT_SUFFIX ".tmp.")) {
            snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
}

/* The thread's half: the copy encoded, written, and the older ones pruned. */
static void *write_copied(void *arg)
{
    rt_ckpt *c = arg;
    uint8_t *state = NULL, *file = NULL;
    size_t len = 0;
    int rc = safetensors(&c->ts, c->model, &state, &len);
    c->h.state_bytes = len;
    if (rc == 0)
        rc = rt_ckpt_encode(&c->h, state, c->opt, &file, &len);
    if (rc == 0)
        rc = base_write_atomic(c->path, file, len, true);
    free(state);
    free(file);
    if (rc == 0)
        prune(c, c->name);
    c->rc = rc;
    atomic_store(&c->finished, true);
    return NULL;
}

/* What a write left behind freed; a failed one fails the run, a finished
 * one is the newest written. */
static int finish_write(rt_ckpt *c, char *err, size_t errlen)
{
    free(c->opt);
    c->opt = NULL;
    rt_tensors_free(&c->ts);
    int rc = c->rc;
    if (rc)
        return base_errf(err, errlen, rc < 0 ? FERRY_EIO : rc,
                         "cannot write checkpoint %s: %s", c->path,
                         rc < 0 ? strerror(-rc) : ferry_strerror(rc));
    snprintf(c->written, sizeof c->written, "%s", c->path);
    return 0;
}

/* Waits for the write in flight, if any. */
static int join_write(rt_ckpt *c, char *err, size_t errlen)
{
    if (!c->busy)
        return 0;
    pthread_join(c->th, NULL);
    c->busy = false;
    return finish_write(c, err, errlen);
}

/* The step path's half: what rank 0 holds copied (the parameters, the
 * model's buffers, the optimizer's moments, the header), then written on
 * a thread. One write at a time: the one before is waited for. */
static int write_one(rt_trainer *t, uint64_t epoch_step, char *err, size_t errlen)
{
    double t0 = rt_timeline_now();
    rt_ckpt *c = t->ck;
    int rc = join_write(c, err, errlen);
    if (rc)
        return rc;
    rt_ckpt_fill_head(t, c->model, &c->h, epoch_step);
    float *host = malloc(t->plen * sizeof *host);
    rc = host ? t->mode->params(t, host, NULL, NULL) : FERRY_ENOMEM;
    if (rc == 0)
        rc = rt_trainer_tensors(t, host, &c->ts);
    free(host);
    c->h.state_floats = c->ts.floats;
    if (rc == 0)
        rc = optim_bytes(t, &c->h, &c->opt);
    rt_ckpt_name(t->steps_done, c->name, sizeof c->name);
    snprintf(c->path, sizeof c->path, "%s/%s", c->dir, c->name);
    /* On the timeline: what the others wait for, the copy (the write runs
     * on its own thread). */
    rt_timeline_since(t->tl, PROTO_TL_CKPT, 0, t0);
    c->last_t = rt_train_now();
    c->rc = rc;
    atomic_store(&c->finished, false);
    if (rc == 0 && pthread_create(&c->th, NULL, write_copied, c) == 0) {
        c->busy = true;
        return 0;
    }
    if (rc == 0) /* no thread: written here, on the step path */
        write_copied(c);
    return finish_write(c, err, errlen);
}

/* A write in flight that has finished: collected, so that its failure
 * fails the run at the next step rather than at the next write. */
static int collect(rt_ckpt *c, char *err, size_t errlen)
{
    return c->busy && atomic_load(&c->finished) ? join_write(c, err, errlen) : 0;
}

int rt_ckpt_after_step(rt_trainer *t, const rt_epoch_run *r)
{
    rt_ckpt *c = t->ck;
    if (!c || (!c->every_steps && !c->every_s))
        return 0;
    int rc = collect(c, r->err, r->errlen);
    bool due = c->every_steps ? t->steps_done % c->every_steps == 0
                              : rt_train_now() - c->last_t >= c->every_s;
    if (rc || !due)
        return rc;
    /* The epoch's last step: written at its end, with the epoch counted. */
    if (r->step >= rt_loader_steps(t->train)) {
        c->due = true;
        return 0;
    }
    return write_one(t, r->step, r->err, r->errlen);
}

int rt_ckpt_after_epoch(rt_trainer *t, char *err, size_t errlen)
{
    rt_ckpt *c = t->ck;
    if (!c)
        return 0;
    int rc = collect(c, err, errlen);
    if (rc == 0 && (c->due || (!c->every_steps && !c->every_s))) {
        c->due = false;
        rc = write_one(t, 0, err, errlen);
    }
    /* The run's last checkpoint is reported with its last epoch. */
    if (rc == 0 && (t->o.epochs <= 0 || t->epoch >= t->o.epochs))
        rc = join_write(c, err, errlen);
    return rc;
}

void rt_ckpt_take_written(rt_trainer *t, char *buf, size_t len)
{
    snprintf(buf, len, "%s", t->ck ? t->ck->written : "");
    if (t->ck)
        t->ck->written[0] = '\0';
}

/* The state section's values laid into the trainer's parameters and the
 * model's buffers: the checkpoint's tensors are the model's, in its order
 * (the header's counts said so, the checksum that they are as written). */
static int restore_state(rt_trainer *t, const rt_ckpt_file *f, char *err, size_t errlen)
{
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)f->state[i] << (8 * i);
    if (f->h.state_bytes < 8 || hl > f->h.state_bytes - 8 ||
        f->h.state_bytes - 8 - hl != f->h.state_floats * sizeof(float))
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "its state section does not hold %" PRIu64 " values",
                         f->h.state_floats);
    float *host = malloc(t->plen * sizeof *host), *flat = NULL;
    rt_tensors ts = {0};
    int rc = host ? t->mode->params(t, host, NULL, NULL) : FERRY_ENOMEM;
    if (rc == 0)
        rc = rt_trainer_tensors(t, host, &ts); /* the model's names and shapes */
    if (rc == 0 && ts.floats != f->h.state_floats)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "it holds %" PRIu64 " values of parameters and buffers, the "
                       "model has %zu",
                       f->h.state_floats, ts.floats);
    if (rc == 0) {
        memcpy((void *)ts.values, f->state + 8 + hl, ts.floats * sizeof(float));
        char why[512];
        if ((rc = rt_tensors_to_flat(t->m, &ts, &flat, why, sizeof why)))
            base_errf(err, errlen, rc, "%s", why);
    }
    if (rc == 0)
        rc = t->dev->ops->upload(t->dev, t->params, flat, t->plen * sizeof(float));
    if (rc == 0)
        rc = rt_model_ctx_set_buffers(&t->mc, flat + t->plen);
    free(flat);
    free(host);
    rt_tensors_free(&ts);
    return rc;
}

static int restore_optim(rt_trainer *t, const rt_ckpt_file *f, char *err, size_t errlen)
{
    rt_optim_state s;
    rt_optim_state_of(t->opt, &s);
    size_t k = (size_t)(s.m != NULL) + (size_t)(s.v != NULL);
    if ((f->h.optim_m != 0) != (s.m != NULL) || (f->h.optim_v != 0) != (s.v != NULL) ||
        f->h.optim_bytes != k * s.n * sizeof(float) || f->h.plen != t->plen)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "its optimizer (%s, momentum %g) is not this run's (%s, "
                         "momentum %g)",
                         f->h.optimizer, f->h.momentum, rt_optim_name(t->o.optim.kind),
                         (double)t->o.optim.momentum);
    const uint8_t *at = f->optim;
    int rc = 0;
    if (s.m && (rc = t->dev->ops->upload(t->dev, s.m, at, s.n * sizeof(float))) == 0)
        at += s.n * sizeof(float);
    if (rc == 0 && s.v)
        rc = t->dev->ops->upload(t->dev, s.v, at, s.n * sizeof(float));
    rt_optim_set_steps(t->opt, (int)f->h.optim_t);
    return rc;
}

void rt_ckpt_restore_rng(rt_trainer *t, const rt_ckpt_head *h)
{
    rt_rng *g = t->mc.rng;
    g->s[0] = h->rng0;
    g->s[1] = h->rng1;
    g->s[2] = h->rng2;
    g->s[3] = h->rng3;
    memcpy(&g->spare, &h->rng_spare, sizeof g->spare);
    g->has_spare = h->rng_has_spare != 0;
}

static int resume(rt_trainer *t, char *err, size_t errlen)
{
    rt_ckpt_file f;
    char why[512];
    int rc = rt_ckpt_read(t->o.resume, &f, why, sizeof why);
    if (rc)
        return base_errf(err, errlen, rc, "cannot continue from %s: %s", t->o.resume,
                         why);
    if (f.h.shards)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "cannot continue from %s: it is shard %" PRId64
                       " of an async run's "
                       "checkpoint",
                       t->o.resume, f.h.shard);
    else if (f.h.params != rt_model_param_count(t->m) ||
             strcmp(f.h.optimizer, rt_optim_name(t->o.optim.kind)))
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "%" PRIu64 " %s parameters, this run trains %zu with %s",
                       f.h.params, f.h.optimizer, rt_model_param_count(t->m),
                       rt_optim_name(t->o.optim.kind));
    if (rc == 0)
        rc = restore_state(t, &f, err, errlen);
    if (rc == 0)
        rc = restore_optim(t, &f, err, errlen);
    if (rc == 0) {
        rt_ckpt_restore_rng(t, &f.h);
        t->epoch = (int)f.h.epoch;
        t->steps_done = f.h.steps;
        t->ckpt_skip = f.h.epoch_step;
    } else if (err[0] && !strstr(err, t->o.resume)) {
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", err);
        base_errf(err, errlen, rc, "cannot continue from %s: %s", t->o.resume, inner);
    }
    rt_ckpt_file_free(&f);
    return rc;
}

int rt_ckpt_setup(rt_trainer *t, char *err, size_t errlen)
{
    if (t->mode->own_checkpoints)
        return 0;
    int rc = t->o.resume && *t->o.resume ? resume(t, err, errlen) : 0;
    if (rc || !t->o.ckpt_dir || !*t->o.ckpt_dir || t->o.rank != 0)
        return rc;
    rt_ckpt *c = calloc(1, sizeof *c);
    if (!c)
        return FERRY_ENOMEM;
    t->ck = c;
    c->keep = t->o.ckpt_keep > 0 ? t->o.ckpt_keep : 2;
    c->last_t = rt_train_now();
    c->dir = strdup(t->o.ckpt_dir);
    c->model = strdup(t->o.ckpt_model && *t->o.ckpt_model ? t->o.ckpt_model : "model");
    c->mine = calloc((size_t)c->keep, sizeof *c->mine);
    if (!c->dir || !c->model || !c->mine)
        return FERRY_ENOMEM;
    if (rt_ckpt_parse_every(t->o.ckpt_every, &c->every_steps, &c->every_s) != 0)
        return base_errf(err, errlen, FERRY_EINVAL, "--checkpoint-every '%s': %s",
                         t->o.ckpt_every, RT_CKPT_EVERY_EXPECTED);
    if (mkdir(c->dir, 0777) != 0 && errno != EEXIST)
        return base_errf(err, errlen, FERRY_EIO,
                         "cannot make the checkpoint directory %s: %s", c->dir,
                         strerror(errno));
    return access(c->dir, W_OK) == 0
               ? 0
               : base_errf(err, errlen, FERRY_EIO, "cannot write into %s: %s", c->dir,
                           strerror(errno));
}

uint64_t rt_ckpt_take_skip(rt_trainer *t)
{
    uint64_t k = t->ckpt_skip;
    t->ckpt_skip = 0;
    return k;
}

void rt_ckpt_free(rt_trainer *t)
{
    if (!t->ck)
        return;
    char err[64];
    join_write(t->ck, err, sizeof err); /* a run that failed: its error is said */
    free(t->ck->dir);
    free(t->ck->model);
    free(t->ck->mine);
    free(t->ck);
    t->ck = NULL;
}
