/* Bounds for a task descriptor: every pointer that a worker or `ferry
 * submit` follows from it (names, function tables, the driver, the model and
 * its parameter table) is checked against the module's own loaded segments
 * before it is followed. A table that lost its {NULL, NULL} terminator, a
 * function pointer made of garbage, a name that points nowhere: each is
 * refused with a sentence naming the module instead of crashing whoever
 * walks the descriptor first (every worker, on LoadModule).
 *
 * The cost of the rule: names and tables must live in the module itself
 * (string literals and static arrays do), and functions must be the
 * module's own code; a descriptor that points into another library or the
 * heap is refused. */
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

/* More than any real module has; bounds the walk of a table that never ends
 * inside a huge data segment. */
#define MAX_ENTRIES 4096
#define MAX_NAME    256

/* The refusal text of every check, here and in module.c: "<name>: <why>". */
int rt_module_refuse(char *err, size_t errlen, const char *name, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s: ", name);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return FERRY_EINVAL;
}

typedef struct seg {
    uintptr_t lo, hi; /* [lo, hi) */
    bool exec;
} seg;

typedef struct segs {
    seg s[32];
    int n;
    uintptr_t base;
    const char *path;
} segs;

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    segs *g = arg;
    if (info->dlpi_addr != g->base || !info->dlpi_name ||
        strcmp(info->dlpi_name, g->path) != 0)
        return 0;
    for (int i = 0; i < info->dlpi_phnum && g->n < (int)(sizeof g->s / sizeof g->s[0]);
         i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) || !ph->p_memsz)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        g->s[g->n++] = (seg){lo, lo + ph->p_memsz, (ph->p_flags & PF_X) != 0};
    }
    return 1;
}

/* The readable segment holding [p, p+len) whole, or NULL. */
static const seg *holding(const segs *g, const void *p, size_t len, bool exec)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < g->n; i++) {
        const seg *s = &g->s[i];
        if (a >= s->lo && a < s->hi && len <= s->hi - a && (!exec || s->exec))
            return s;
    }
    return NULL;
}

/* A string inside the module, terminated within MAX_NAME bytes and within
 * its segment. */
static bool string_ok(const segs *g, const char *s)
{
    const seg *in = holding(g, s, 1, false);
    if (!in)
        return false;
    size_t room = in->hi - (uintptr_t)s;
    return memchr(s, '\0', room < MAX_NAME ? room : MAX_NAME) != NULL;
}

static bool code_ok(const segs *g, const void *fn)
{
    return holding(g, fn, 1, true) != NULL;
}

static int check_functions(const segs *g, const ferry_function_t *fns, const char *name,
                           char *err, size_t errlen)
{
    for (int i = 0;; i++) {
        const ferry_function_t *f = &fns[i];
        if (i == MAX_ENTRIES || !holding(g, f, sizeof *f, false))
            return rt_module_refuse(
                err, errlen, name,
                "the function table runs past the module's data after %d "
                "entries: it lacks its {NULL, NULL} terminator",
                i);
        if (!f->name)
            return 0;
        if (!string_ok(g, f->name))
            return rt_module_refuse(
                err, errlen, name,
                "function table entry %d: its name (%p) is not a string in "
                "the module%s",
                i, (const void *)f->name,
                i ? " (a table without its {NULL, NULL} terminator?)" : "");
        if (!f->fn)
            return rt_module_refuse(err, errlen, name, "function '%s' has no code",
                                    f->name);
        if (!code_ok(g, (const void *)f->fn))
            return rt_module_refuse(err, errlen, name,
                                    "function '%s' points outside the module's code (%p)",
                                    f->name, (const void *)f->fn);
    }
}

/* A table of tensors (params or buffers) lies in the module's data, each
 * name a string there, up to its {NULL} terminator. */
static int check_table(const segs *g, const ferry_param_t *t, const char *what,
                       const char *name, char *err, size_t errlen)
{
    for (int i = 0; t; i++) {
        const ferry_param_t *p = &t[i];
        if (i == MAX_ENTRIES || !holding(g, p, sizeof *p, false))
            return rt_module_refuse(err, errlen, name,
                                    "the model's %s table runs past the module's data "
                                    "after %d entries: it lacks its {NULL} terminator",
                                    what, i);
        if (!p->name)
            return 0;
        if (!string_ok(g, p->name))
            return rt_module_refuse(
                err, errlen, name,
                "the model's %s %d: its name is not a string in the module", what, i);
    }
    return 0;
}

static int check_model(const segs *g, const ferry_model_t *m, const char *name, char *err,
                       size_t errlen)
{
    if (!holding(g, m, 2 * sizeof(uint32_t), false))
        return rt_module_refuse(err, errlen, name,
                                "the model (%p) is not inside the module",
                                (const void *)m);
    /* A descriptor whose initialiser left out FERRY_MODEL_HEADER has
     * version 0: said here, with the cure, rather than as "model ABI
     * version 0" from every worker once training starts. */
    if (m->version == 0)
        return rt_module_refuse(err, errlen, name,
                                "the model has no ABI version (0): its descriptor must "
                                "begin with FERRY_MODEL_HEADER, as in "
                                "`static const ferry_model_t model = "
                                "{FERRY_MODEL_HEADER, .kind = ...}`");
    /* Version and size before the rest; an older or newer layout is the
     * trainer's to refuse, in its own words, so only what fits is walked. */
    if (m->version != FERRY_MODEL_ABI_VERSION || m->size < FERRY_MODEL_SIZE_V1)
        return 0;
    /* A descriptor built before a member was added is shorter: only what
     * its size covers is read. */
    size_t size = m->size < sizeof *m ? m->size : sizeof *m;
    if (!holding(g, m, size, false))
        return rt_module_refuse(err, errlen, name,
                                "the model's %u bytes run past the module", m->size);
    bool has_metrics = size >= offsetof(ferry_model_t, metrics) + sizeof m->metrics;
    bool has_buffers =
        size >= offsetof(ferry_model_t, init_buffers) + sizeof m->init_buffers;
    if (m->dataset && !string_ok(g, m->dataset))
        return rt_module_refuse(err, errlen, name,
                                "the model's dataset name is not a string in "
                                "the module");
    const struct {
        const char *what;
        const void *fn;
    } fns[] = {{"workspace", (const void *)m->workspace},
               {"init", (const void *)m->init},
               {"loss_grad", (const void *)m->loss_grad},
               {"evaluate", (const void *)m->evaluate},
               {"metrics", has_metrics ? (const void *)m->metrics : NULL},
               {"init_buffers", has_buffers ? (const void *)m->init_buffers : NULL}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (fns[i].fn && !code_ok(g, fns[i].fn))
            return rt_module_refuse(
                err, errlen, name, "the model's %s points outside the module's code (%p)",
                fns[i].what, fns[i].fn);
    int rc = check_table(g, m->params, "parameter", name, err, errlen);
    return rc || !has_buffers ? rc
                              : check_table(g, m->buffers, "buffer", name, err, errlen);
}

int rt_module_check_descriptor(void *handle, const ferry_task_t *t, const char *name,
                               char *err, size_t errlen)
{
    struct link_map *lm = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
        return rt_module_refuse(err, errlen, name, "cannot find where it was loaded");
    segs g = {.base = lm->l_addr, .path = lm->l_name};
    dl_iterate_phdr(collect, &g);
    if (!g.n)
        return rt_module_refuse(err, errlen, name, "cannot find its loaded segments");

    if (!string_ok(&g, t->name))
        return rt_module_refuse(
            err, errlen, name,
            "the task descriptor's name (%p) is not a string in the module",
            (const void *)t->name);
    if (t->driver && !code_ok(&g, (const void *)t->driver))
        return rt_module_refuse(err, errlen, name,
                                "the driver points outside the module's code (%p)",
                                (const void *)t->driver);
    int rc = t->functions ? check_functions(&g, t->functions, name, err, errlen) : 0;
    if (!rc && t->model)
        rc = check_model(&g, t->model, name, err, errlen);
    return rc;
}
