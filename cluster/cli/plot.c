/* `ferry plot RUN...`: loss and accuracy against time and against steps,
 * several runs side by side, drawn by gnuplot (Debian's gnuplot-nox) into
 * a PNG or an SVG. ferry writes the script and the data; gnuplot draws. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "cli.h"
#include "cluster/runs/runs.h"

extern char **environ;

static const char usage[] =
    "usage: ferry plot RUN... [--out FILE]\n"
    "       ferry plot --last N [--out FILE]\n"
    "\n"
    "Draws the test and training loss, and a classifier's test accuracy, of each\n"
    "RUN against wall time and against steps, the runs side by side (sync against\n"
    "async, say, or two learning rates). RUN is an id from `ferry runs`, the\n"
    "unique start of one, \"last\", or a run's directory; --last N draws the N\n"
    "newest. Drawn by gnuplot\n"
    "(Debian: apt install gnuplot-nox; $FERRY_GNUPLOT names another program).\n"
    "\n"
    "options:\n"
    "  -o, --out FILE   where: FILE.png or FILE.svg (default ferry-plot.svg)\n"
    "      --last N     the N newest runs (1 to 16)\n"
    "      --size WxH   the picture's size in pixels (default 1400x900)\n"
    "  -h, --help       this text\n";

typedef struct plot_opts {
    const char *out;
    long last, width, height;
} plot_opts;

/* gnuplot's terminal for the file's kind, or false. */
static bool terminal_for(const plot_opts *o, char *buf, size_t len)
{
    const char *dot = strrchr(o->out, '.');
    bool png = dot && strcmp(dot, ".png") == 0, svg = dot && strcmp(dot, ".svg") == 0;
    snprintf(buf, len, "%s size %ld,%ld%s noenhanced", png ? "pngcairo" : "svg", o->width,
             o->height, svg ? " dynamic" : "");
    return png || svg;
}

/* One run's epochs as a gnuplot data block: step, seconds, losses,
 * accuracy ("NaN" leaves a regressor's out); and its training loss through
 * the epochs, where recorded, as a second: step, seconds, loss (the same
 * columns as the first's). */
static void data_block(FILE *f, int i, const runs_run *r)
{
    if (r->n_steps) {
        fprintf(f, "$steps%d << EOD\n", i);
        for (size_t k = 0; k < r->n_steps; k++)
            fprintf(f, "%llu %.6g %.8g\n", (unsigned long long)r->steps[k].step,
                    r->steps[k].wall_s, r->steps[k].loss);
        fprintf(f, "EOD\n");
    }
    fprintf(f, "$run%d << EOD\n", i);
    for (size_t k = 0; k < r->n; k++) {
        const runs_point *p = &r->points[k];
        fprintf(f, "%llu %.6g %.8g %.8g ", (unsigned long long)p->step, p->wall_s,
                p->train_loss, p->test_loss);
        if (isnan(p->test_accuracy))
            fprintf(f, "NaN\n");
        else
            fprintf(f, "%.8g\n", p->test_accuracy);
    }
    fprintf(f, "EOD\n");
}

/* One panel: column `y` of every run against column `x`; with `dashed`,
 * column `dashed` too, in the run's colour. */
static void panel(FILE *f, const runs_run *runs, int n, int x, int y, int dashed,
                  const char *title, const char *xlabel, const char *ylabel)
{
    /* loss falls and accuracy rises: the key goes where the curves are not;
     * a loss falls by orders of magnitude in the first steps: a log scale */
    fprintf(f,
            "set title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset key %s right\n%s "
            "logscale y\nplot ",
            title, xlabel, ylabel, dashed ? "top" : "bottom", dashed ? "set" : "unset");
    for (int i = 0; i < n; i++) {
        fprintf(
            f,
            "%s$run%d using %d:%d with linespoints lc %d pt 7 ps 0.6 title '%s (%s x%d)'",
            i ? ", " : "", i, x, y, i + 1, runs[i].id, runs[i].mode ? runs[i].mode : "?",
            runs[i].workers);
        if (dashed)
            fprintf(f, ", $%s%d using %d:%d with lines lc %d dt 2 notitle",
                    runs[i].n_steps ? "steps" : "run", i, x, dashed, i + 1);
    }
    fprintf(f, "\n");
}

static int write_script(FILE *f, const runs_run *runs, int n, const char *out,
                        const char *terminal)
{
    bool accuracy = false;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < runs[i].n; k++)
            accuracy |= !isnan(runs[i].points[k].test_accuracy);
    fprintf(f, "set terminal %s\nset output '%s'\nset grid\n", terminal, out);
    for (int i = 0; i < n; i++)
        data_block(f, i, &runs[i]);
    fprintf(f, "set multiplot layout %d,2\n", accuracy ? 2 : 1);
    panel(f, runs, n, 2, 4, 3, "loss (test; training dashed)", "seconds", "loss");
    panel(f, runs, n, 1, 4, 3, "loss (test; training dashed)", "step", "loss");
    if (accuracy) {
        panel(f, runs, n, 2, 5, 0, "test accuracy", "seconds", "accuracy");
        panel(f, runs, n, 1, 5, 0, "test accuracy", "step", "accuracy");
    }
    fprintf(f, "unset multiplot\n");
    return fflush(f) == 0 && !ferror(f) ? 0 : FERRY_EIO;
}

/* Runs gnuplot on `script`; its own errors reach the user's stderr. */
static int draw(const char *script)
{
    const char *prog = getenv("FERRY_GNUPLOT");
    if (!prog || !*prog)
        prog = "gnuplot";
    char *args[] = {(char *)prog, (char *)script, NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, prog, NULL, NULL, args, environ);
    if (rc == ENOENT) {
        cli_err("plot",
                "%s is not installed: ferry plot draws with gnuplot "
                "(Debian: apt install gnuplot-nox)",
                prog);
        return CLI_FAIL;
    }
    if (rc) {
        cli_err("plot", "cannot run %s: %s", prog, strerror(rc));
        return CLI_FAIL;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        cli_err("plot", "%s failed (%s %d)", prog,
                WIFEXITED(st) ? "exit status" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return CLI_FAIL;
    }
    return CLI_OK;
}

#define PLOT_MAX_LAST 16

/* "WxH", each side 100 to 10000 pixels. */
static bool parse_size(const char *s, long *w, long *h)
{
    char ws[16], hs[16];
    return sscanf(s, "%15[0-9]x%15[0-9]", ws, hs) == 2 &&
           strlen(ws) + strlen(hs) + 1 == strlen(s) &&
           base_parse_long(ws, 100, 10000, w) && base_parse_long(hs, 100, 10000, h);
}

static int parse(int argc, char **argv, plot_opts *o)
{
    static const struct option longs[] = {{"out", required_argument, NULL, 'o'},
                                          {"last", required_argument, NULL, 'l'},
                                          {"size", required_argument, NULL, 's'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    *o = (plot_opts){.out = "ferry-plot.svg", .width = 1400, .height = 900};
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "ho:", longs, NULL)) != -1) {
        if (ch == 'h') {
            fputs(usage, stdout);
            return -1;
        }
        if (ch == 'o')
            o->out = optarg;
        else if (ch == 's' && parse_size(optarg, &o->width, &o->height))
            continue;
        else if (ch != 'l' || !base_parse_long(optarg, 1, PLOT_MAX_LAST, &o->last))
            goto bad;
    }
    if ((optind < argc) != (o->last > 0))
        return 0;
bad:
    fputs(usage, stderr);
    return CLI_USAGE;
}

/* The names of the `last` newest runs, oldest first, into *names (n of
 * them; freed with runs_ids_free). */
static int newest(const char *home, long last, char ***names, int *n)
{
    char **ids;
    size_t all;
    if (runs_ids(home, &ids, &all) != 0) {
        cli_err("plot", "out of memory");
        return CLI_FAIL;
    }
    if (all < (size_t)last) {
        cli_err("plot", "--last %ld: %zu run%s recorded under %s/runs", last, all,
                all == 1 ? "" : "s", home);
        runs_ids_free(ids, all);
        return CLI_FAIL;
    }
    for (size_t i = 0; i < all - (size_t)last; i++)
        free(ids[i]);
    memmove(ids, ids + (all - (size_t)last), (size_t)last * sizeof *ids);
    *names = ids;
    *n = (int)last;
    return 0;
}

/* Loads every run named, refusing one with no epoch to draw. */
static int load_all(const char *home, char **names, int n, runs_run *runs)
{
    for (int i = 0; i < n; i++) {
        char dir[4200], err[512] = "";
        if (runs_find(home, names[i], dir, sizeof dir, err, sizeof err) != 0 ||
            runs_load(dir, &runs[i], err, sizeof err) != 0) {
            cli_err("plot", "%s", err);
            return CLI_FAIL;
        }
        if (runs[i].n == 0) {
            cli_err("plot", "%s: the run recorded no epoch yet: nothing to draw",
                    runs[i].id);
            return CLI_FAIL;
        }
    }
    return 0;
}

int cli_plot(int argc, char **argv)
{
    plot_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    const char *out = o.out;
    char terminal[96];
    if (!terminal_for(&o, terminal, sizeof terminal) || strchr(out, '\'')) {
        cli_err("plot", "--out %s: give a file name ending in .png or .svg (without ')",
                out);
        return CLI_USAGE;
    }
    home_paths h;
    if (cli_home_init(&h, "plot") != 0)
        return CLI_FAIL;
    int n = argc - optind;
    char **names = argv + optind, **found = NULL;
    if (o.last && newest(h.dir, o.last, &found, &n) != 0)
        return CLI_FAIL;
    if (found)
        names = found;
    runs_run *runs = calloc((size_t)n, sizeof *runs);
    rc = runs ? load_all(h.dir, names, n, runs) : CLI_FAIL;
    if (!runs)
        cli_err("plot", "out of memory");
    char script[] = "/tmp/ferry-plot-XXXXXX";
    int fd = rc ? -1 : mkstemp(script);
    if (rc == 0 && fd < 0) {
        cli_err("plot", "cannot make a temporary file: %s", strerror(errno));
        rc = CLI_FAIL;
    }
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        if (!f || write_script(f, runs, n, out, terminal) != 0) {
            cli_err("plot", "cannot write %s", script);
            rc = CLI_FAIL;
        }
        if (f)
            fclose(f);
        else
            close(fd);
        if (rc == 0 && (rc = draw(script)) == CLI_OK)
            printf("%s: %d run%s drawn\n", out, n, n == 1 ? "" : "s");
        unlink(script);
    }
    for (int i = 0; runs && i < n; i++)
        runs_run_fini(&runs[i]);
    free(runs);
    if (found)
        runs_ids_free(found, (size_t)n);
    return rc;
}
