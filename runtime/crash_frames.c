/* A crashed task's frames, named: which callback of its model (or which of
 * its functions) was running, and each frame from the faulting instruction
 * out to the runtime, as "symbol+offset (file)", from the module's own
 * symbol table (static functions included) through elfutils' libdwfl.
 *
 * None of this is async-signal-safe (libdwfl reads /proc/self/maps and the
 * ELF files, and allocates): the signal handler calls it only after the
 * plain record is written, under an alarm, so that a crash inside malloc
 * that leaves its lock held costs the detail, never the worker's death. */
#include <elfutils/libdwfl.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "runtime_int.h"

#define MAX_FRAMES 48
#define MAX_SHOWN  10

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

void rt_crash_frames_prepare(void)
{
    /* backtrace() loads libgcc_s the first time: now, not in a handler. */
    void *f[2];
    backtrace(f, 2);
}

/* The instruction that faulted, from the signal's context; 0 if unknown. */
static uintptr_t fault_pc(const void *ucontext)
{
    const ucontext_t *uc = ucontext;
#if defined(__x86_64__)
    return uc ? (uintptr_t)uc->uc_mcontext.gregs[REG_RIP] : 0;
#elif defined(__aarch64__)
    return uc ? (uintptr_t)uc->uc_mcontext.pc : 0;
#else
    (void)uc;
    return 0;
#endif
}

/* The task descriptor of the module `mod`, when it is a task module. */
static const ferry_task_t *task_of(Dwfl_Module *mod)
{
    int n = dwfl_module_getsymtab(mod);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);
        if (name && GELF_ST_TYPE(sym.st_info) == STT_OBJECT &&
            strcmp(name, "ferry_task") == 0)
            return (const ferry_task_t *)(uintptr_t)addr;
    }
    return NULL;
}

/* What the runtime calls at `start` in task t: "the model's loss_grad",
 * "function chat"; NULL if none. */
static const char *entry_name(const ferry_task_t *t, uintptr_t start, char *buf,
                              size_t len)
{
    const ferry_model_t *m = t->model;
    if (m && m->version == FERRY_MODEL_ABI_VERSION) {
        const struct {
            const char *what;
            uintptr_t fn;
        } cbs[] = {{"workspace", (uintptr_t)m->workspace},
                   {"init", (uintptr_t)m->init},
                   {"loss_grad", (uintptr_t)m->loss_grad},
                   {"evaluate", (uintptr_t)m->evaluate}};
        for (size_t i = 0; i < sizeof cbs / sizeof cbs[0]; i++)
            if (cbs[i].fn == start) {
                snprintf(buf, len, "the model's %s", cbs[i].what);
                return buf;
            }
    }
    for (const ferry_function_t *f = t->functions; f && f->name; f++)
        if ((uintptr_t)f->fn == start) {
            snprintf(buf, len, "function %s", f->name);
            return buf;
        }
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path ? path : "?";
}

/* Appends one frame; returns the entry it is, if the runtime called it. */
static const char *add_frame(Dwfl *dwfl, uintptr_t pc, bool first, const char *shown,
                             char *out, size_t len, size_t *used, bool *in_task,
                             char *entry, size_t entry_len)
{
    /* A return address is the instruction after the call: look it up
     * one byte back, so that a call at a function's end is not named as
     * the next function. */
    uintptr_t at = first ? pc : pc - 1;
    Dwfl_Module *mod = dwfl_addrmodule(dwfl, at);
    const char *file = NULL;
    if (mod) {
        const char *main_file = NULL;
        file = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &main_file, NULL);
        file = main_file ? main_file : file;
    }
    const ferry_task_t *t = mod ? task_of(mod) : NULL;
    *in_task = t != NULL;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name =
        mod ? dwfl_module_addrinfo(mod, at, &off, &sym, NULL, NULL, NULL) : NULL;
    uintptr_t start = at - off;
    int n = name ? snprintf(out + *used, len - *used, "%s%s+0x%llx (%s)",
                            *used ? ", " : "", name, (unsigned long long)(pc - start),
                            t && shown ? shown : base_name(file))
                 : snprintf(out + *used, len - *used, "%s0x%llx (%s)", *used ? ", " : "",
                            (unsigned long long)pc, base_name(file));
    if (n > 0)
        *used += (size_t)n < len - *used ? (size_t)n : len - *used - 1;
    return t && name ? entry_name(t, start, entry, entry_len) : NULL;
}

size_t rt_crash_frames(const void *ucontext, const char *shown, char *out, size_t len)
{
    out[0] = '\0';
    void *frames[MAX_FRAMES];
    int n = backtrace(frames, MAX_FRAMES);
    uintptr_t pc = fault_pc(ucontext);
    int from = 0;
    while (pc && from < n && (uintptr_t)frames[from] != pc)
        from++;
    if (from == n)
        from = 0; /* not found: every frame, the handler's included */
    Dwfl *dwfl = dwfl_begin(&callbacks);
    if (!dwfl)
        return 0;
    if (dwfl_linux_proc_report(dwfl, getpid()) != 0 ||
        dwfl_report_end(dwfl, NULL, NULL)) {
        dwfl_end(dwfl);
        return 0;
    }
    char body[768] = "", entry[96] = "";
    const char *called = NULL;
    size_t used = 0;
    bool seen_task = false;
    for (int i = from, shown_n = 0; i < n && shown_n < MAX_SHOWN; i++, shown_n++) {
        bool in_task = false;
        char here[96];
        const char *e = add_frame(dwfl, (uintptr_t)frames[i], i == from && pc, shown,
                                  body, sizeof body, &used, &in_task, here, sizeof here);
        if (e) {
            snprintf(entry, sizeof entry, "%s", e);
            called = entry;
        }
        if (seen_task && !in_task)
            break; /* back in the runtime: the module's frames are all said */
        seen_task |= in_task;
    }
    dwfl_end(dwfl);
    int w = snprintf(out, len, "%s%s; frames: %s", called ? " in " : "",
                     called ? called : "", body);
    return w > 0 ? strnlen(out, len) : 0;
}
