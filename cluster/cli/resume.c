/* `ferry submit ... --resume DIR`: the newest checkpoint of DIR that is
 * whole, unaltered and this model's, chosen before anything is shipped;
 * every newer one that is not is named with why it was skipped. The
 * workers read the chosen file themselves, as they read --data. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "cli.h"
#include "cli_plugin.h"
#include "runtime/train/ckpt_file.h"

/* Why `f` cannot be this run's start, into why; false when it can. */
static bool foreign(const rt_ckpt_file *f, const cli_module_info *info, char *why,
                    size_t len)
{
    if (strcmp(f->h.model, info->task) != 0)
        snprintf(why, len, "it is task '%s''s, not '%s''s", f->h.model, info->task);
    else if (info->params && f->h.params != info->params)
        snprintf(why, len, "it holds %" PRIu64 " parameters, the model has %" PRIu64,
                 f->h.params, info->params);
    else
        return false;
    return true;
}

/* The options the checkpoint's run trained with that differ from this
 * run's: the run continues, but is not the one it continues, bit for bit
 * (a longer --epochs stretches the cosine schedule, for one). */
static void say_differences(const rt_ckpt_file *f, const cluster_train_opts *o)
{
    char d[512] = "";
    size_t n = 0;
#define DIFF(cond, ...)                                                                  \
    if ((cond) && n < sizeof d)                                                          \
        n += (size_t)snprintf(d + n, sizeof d - n, __VA_ARGS__);
    DIFF(f->h.seed != o->seed, " --seed %" PRIu64 ",", f->h.seed)
    DIFF(f->h.batch != o->batch, " --batch %" PRId64 ",", f->h.batch)
    DIFF(f->h.epochs != o->epochs, " --epochs %" PRId64 ",", f->h.epochs)
    DIFF(strcmp(f->h.optimizer, o->optimizer) != 0, " --optimizer %s,", f->h.optimizer)
    DIFF((float)f->h.lr != (float)o->lr, " --lr %g,", f->h.lr)
    DIFF((float)f->h.momentum != (float)o->momentum, " --momentum %g,", f->h.momentum)
    DIFF((float)f->h.weight_decay != (float)o->weight_decay, " --weight-decay %g,",
         f->h.weight_decay)
    DIFF((f->h.cosine != 0) != (strcmp(o->schedule, "cosine") == 0), " --schedule %s,",
         f->h.cosine ? "cosine" : "constant")
#undef DIFF
    if (n && n < sizeof d) {
        d[n - 1] = '\0';
        fprintf(stderr,
                "ferry submit: note: the checkpoint's run had%s: this run continues from "
                "its state with its own options\n",
                d);
    }
}

/* Whether every shard of the set (steps, shards) in `dir` is whole and this
 * model's; each that is not is named with why. The set's epochs done (the
 * least of its files') into *epoch, its first file's header into *first. */
static bool set_whole(const char *dir, uint64_t steps, int shards,
                      const cli_module_info *info, uint64_t *epoch, rt_ckpt_file *first)
{
    bool whole = true;
    for (int i = 0; i < shards; i++) {
        char name[96], file[PATH_MAX + 100], why[512];
        rt_ckpt_shard_name(steps, i, shards, name, sizeof name);
        snprintf(file, sizeof file, "%s/%s", dir, name);
        rt_ckpt_file f;
        int rc = rt_ckpt_read(file, &f, why, sizeof why);
        if (rc == FERRY_ENOENT)
            snprintf(why, sizeof why, "it is missing (its holder did not write it)");
        else if (rc == 0 && (f.h.shard != i || f.h.shards != shards))
            snprintf(why, sizeof why, "it says it holds shard %" PRId64 " of %" PRId64,
                     f.h.shard, f.h.shards);
        if (rc == 0 && !foreign(&f, info, why, sizeof why) && f.h.shard == i &&
            f.h.shards == shards) {
            if (f.h.epoch < *epoch)
                *epoch = f.h.epoch;
            if (i == 0) {
                *first = f;
                continue;
            }
        } else {
            fprintf(stderr, "ferry submit: warning: skipping checkpoint %s: %s\n", file,
                    why);
            whole = false;
        }
        rt_ckpt_file_free(&f);
    }
    return whole;
}

/* An async run's: the newest set of which every shard's file is whole. */
static int pick_async(cluster_train_opts *o, const cli_module_info *info, const char *dir,
                      char *file, size_t len)
{
    char **names;
    int n = rt_ckpt_list_shards(dir, &names), status = CLI_FAIL;
    if (n < 0) {
        cli_err("submit", "--resume %s: %s", o->resume, strerror(-n));
        return CLI_FAIL;
    }
    uint64_t steps, prev_steps = 0;
    int shard, shards, prev_shards = 0;
    for (int i = 0; i < n && status == CLI_FAIL; i++) {
        if (!rt_ckpt_is_shard_name(names[i], &steps, &shard, &shards) ||
            (i > 0 && steps == prev_steps && shards == prev_shards))
            continue; /* a set already looked at */
        prev_steps = steps;
        prev_shards = shards;
        uint64_t epoch = UINT64_MAX;
        rt_ckpt_file f = {0};
        if (!set_whole(dir, steps, shards, info, &epoch, &f)) {
            rt_ckpt_file_free(&f);
            continue;
        }
        char name[96];
        rt_ckpt_shard_name(steps, 0, shards, name, sizeof name);
        snprintf(file, len, "%s/%s", dir, name);
        if (epoch >= (uint64_t)o->epochs) {
            cli_err("submit",
                    "--resume %s: %s has finished %" PRIu64 " epochs, and the run is of "
                    "%ld: give --epochs more than %" PRIu64 " to train on",
                    o->resume, file, epoch, o->epochs, epoch);
            status = CLI_USAGE;
        } else {
            say_differences(&f, o);
            o->resume = file;
            o->first_epoch = (int)epoch + 1;
            if (!o->checkpoint_dir || !o->checkpoint_dir[0])
                o->checkpoint_dir = dir;
            fprintf(stderr,
                    "continuing from %s/checkpoint-%012" PRIu64
                    ".shard-*-of-%04d.ckpt (%d "
                    "shards): %" PRIu64 " epochs and %" PRIu64 " steps done\n",
                    dir, steps, shards, shards, epoch, steps);
            status = CLI_OK;
        }
        rt_ckpt_file_free(&f);
    }
    rt_ckpt_names_free(names, n);
    if (status == CLI_FAIL)
        cli_err("submit",
                "--resume %s: no whole set of shard checkpoints of task '%s' "
                "there (%s)",
                o->resume, info->task, n ? "each one above was skipped" : "none at all");
    return status;
}

int cli_resume_pick(cluster_train_opts *o, const cli_module_info *info, char *file,
                    size_t len)
{
    static char dir[PATH_MAX];
    if (!realpath(o->resume, dir)) {
        cli_err("submit", "--resume %s: %s", o->resume, strerror(errno));
        return CLI_FAIL;
    }
    if (o->mode && strcmp(o->mode, "async") == 0)
        return pick_async(o, info, dir, file, len);
    char **names;
    int n = rt_ckpt_list(dir, &names);
    if (n < 0) {
        cli_err("submit", "--resume %s: %s", o->resume, strerror(-n));
        return CLI_FAIL;
    }
    int status = CLI_FAIL;
    for (int i = 0; i < n && status != CLI_OK; i++) {
        char why[512];
        rt_ckpt_file f;
        snprintf(file, len, "%s/%s", dir, names[i]);
        int rc = rt_ckpt_read(file, &f, why, sizeof why);
        if (rc == 0 && !foreign(&f, info, why, sizeof why) &&
            f.h.epoch >= (uint64_t)o->epochs) {
            cli_err("submit",
                    "--resume %s: %s has finished %" PRIu64 " epochs, and the run is of "
                    "%ld: give --epochs more than %" PRIu64 " to train on",
                    o->resume, file, f.h.epoch, o->epochs, f.h.epoch);
            rt_ckpt_file_free(&f);
            rt_ckpt_names_free(names, n);
            return CLI_USAGE;
        }
        if (rc == 0 && !foreign(&f, info, why, sizeof why)) {
            say_differences(&f, o);
            o->resume = file;
            o->first_epoch = (int)f.h.epoch + 1;
            if (!o->checkpoint_dir || !o->checkpoint_dir[0])
                o->checkpoint_dir = dir; /* the run goes on writing there */
            fprintf(stderr,
                    "continuing from %s: %" PRIu64 " epochs and %" PRIu64 " steps done\n",
                    file, f.h.epoch, f.h.steps);
            status = CLI_OK;
        } else {
            fprintf(stderr, "ferry submit: warning: skipping checkpoint %s: %s\n", file,
                    why);
        }
        rt_ckpt_file_free(&f);
    }
    rt_ckpt_names_free(names, n);
    if (status != CLI_OK)
        cli_err("submit", "--resume %s: no valid checkpoint of task '%s' there (%s)",
                o->resume, info->task, n ? "each one above was skipped" : "none at all");
    return status;
}

int cli_checkpoint_dir_fresh(const cluster_train_opts *o)
{
    if (!o->checkpoint_dir || !o->checkpoint_dir[0] || (o->resume && o->resume[0]))
        return CLI_OK;
    char **names;
    int n = rt_ckpt_list(o->checkpoint_dir, &names);
    rt_ckpt_names_free(names, n > 0 ? n : 0);
    if (n >= 0) {
        int k = rt_ckpt_list_shards(o->checkpoint_dir, &names);
        rt_ckpt_names_free(names, k > 0 ? k : 0);
        n += k > 0 ? k : 0;
    }
    if (n <= 0) /* none, or no directory yet: rank 0 makes it */
        return CLI_OK;
    cli_err("submit",
            "--checkpoint-dir %s already holds %d checkpoint%s: continue from %s with "
            "--resume %s, or name another directory",
            o->checkpoint_dir, n, n == 1 ? "" : "s", n == 1 ? "it" : "the newest",
            o->checkpoint_dir);
    return CLI_USAGE;
}
