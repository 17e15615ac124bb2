/* rt_module: one task module, checked before anything in it runs.
 *
 * Every check reads as little of the module as it can before the next one
 * vouches for the rest: the ELF header before dlopen, the symbol's size
 * before its version, the version and size before any other field (NCCL's
 * plugin loader does the same). */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

static uint64_t end_of(uint64_t off, uint64_t len)
{
    uint64_t end;
    return __builtin_add_overflow(off, len, &end) ? UINT64_MAX : end;
}

/* The highest byte the ELF headers say the file holds: the section header
 * table (linkers put it last) and every segment's file image. */
static uint64_t described_size(int fd, const ElfW(Ehdr) * eh, off_t size)
{
    uint64_t need = end_of(eh->e_shoff, (uint64_t)eh->e_shnum * eh->e_shentsize);
    uint64_t phend = end_of(eh->e_phoff, (uint64_t)eh->e_phnum * eh->e_phentsize);
    if (phend > need)
        need = phend;
    if (phend > (uint64_t)size || eh->e_phentsize != sizeof(ElfW(Phdr)))
        return need;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        ElfW(Phdr) ph;
        if (pread(fd, &ph, sizeof ph, (off_t)(eh->e_phoff + i * sizeof ph)) != sizeof ph)
            return UINT64_MAX;
        if (ph.p_type == PT_LOAD && end_of(ph.p_offset, ph.p_filesz) > need)
            need = end_of(ph.p_offset, ph.p_filesz);
    }
    return need;
}

/* dlopen would say "invalid ELF header" or "only ET_DYN and ET_EXEC can be
 * loaded"; a user who shipped the wrong file deserves plainer words. And a
 * truncated file must never reach dlopen: glibc maps segments past its end
 * and dies of SIGBUS reading them. */
static int check_elf(const char *path, const char *name, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rt_module_refuse(err, errlen, name, "cannot open: %s", strerror(errno));
    ElfW(Ehdr) eh;
    struct stat st;
    ssize_t n = read(fd, &eh, sizeof eh);
    int rc = 0;
    if (n < (ssize_t)EI_NIDENT || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        rc = rt_module_refuse(err, errlen, name, "not an ELF shared object");
    else if (n < (ssize_t)sizeof eh)
        rc = rt_module_refuse(err, errlen, name, "truncated ELF file: %zd bytes", n);
    else if (eh.e_type != ET_DYN)
        rc = rt_module_refuse(
            err, errlen, name,
            "not an ELF shared object (ELF type %u; build it with -shared)",
            (unsigned)eh.e_type);
    else if (fstat(fd, &st) != 0)
        rc = rt_module_refuse(err, errlen, name, "cannot stat: %s", strerror(errno));
    else if (eh.e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)) {
        /* (another class is dlopen's to refuse, in its own words) */
        uint64_t need = described_size(fd, &eh, st.st_size);
        if (need > (uint64_t)st.st_size)
            rc = rt_module_refuse(
                err, errlen, name,
                "truncated ELF file: %lld bytes, its headers describe %llu",
                (long long)st.st_size, (unsigned long long)need);
    }
    close(fd);
    return rc;
}

/* dlerror's text starts with the path it was given, a cache file name the
 * user never saw: the module's own name replaces it. */
static int fail_dl(char *err, size_t errlen, const char *name, const char *path,
                   const char *what)
{
    const char *e = dlerror();
    if (!e)
        e = "unknown dynamic loader error";
    size_t plen = strlen(path);
    if (strncmp(e, path, plen) == 0 && strncmp(e + plen, ": ", 2) == 0)
        e += plen + 2;
    return rt_module_refuse(err, errlen, name, "%s: %s", what, e);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int check_task(rt_module *m, const char *name, char *err, size_t errlen)
{
    dlerror();
    void *sym = dlsym(m->handle, FERRY_TASK_SYMBOL);
    if (!sym)
        return rt_module_refuse(err, errlen, name,
                                "no %s symbol: not a ferry task module",
                                FERRY_TASK_SYMBOL);

    /* RTLD_LOCAL lookups still search the module's dependencies: the
     * descriptor must be the module's own, with room for its header. */
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    struct link_map *lm = NULL;
    if (!dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es ||
        dlinfo(m->handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm ||
        strcmp(info.dli_fname, lm->l_name) != 0)
        return rt_module_refuse(err, errlen, name,
                                "no %s symbol of its own: not a ferry task module",
                                FERRY_TASK_SYMBOL);
    if (es->st_size < 2 * sizeof(uint32_t))
        return rt_module_refuse(err, errlen, name,
                                "%s is %zu bytes, not a task descriptor",
                                FERRY_TASK_SYMBOL, (size_t)es->st_size);

    const ferry_task_t *t = sym;
    if (t->version != FERRY_TASK_ABI_VERSION)
        return rt_module_refuse(err, errlen, name, "ABI version %u, this ferry speaks %u",
                                t->version, FERRY_TASK_ABI_VERSION);
    if (t->size < sizeof(ferry_task_t) || es->st_size < t->size)
        return rt_module_refuse(
            err, errlen, name,
            "task descriptor of %u bytes (symbol %zu), this ferry needs %zu", t->size,
            (size_t)es->st_size, sizeof(ferry_task_t));
    if (!t->name)
        return rt_module_refuse(err, errlen, name, "the task descriptor has no name");
    /* Walking the rest follows the module's pointers: each is bounded first. */
    int rc = rt_module_check_descriptor(m->handle, t, name, err, errlen);
    if (rc)
        return rc;
    if (!t->name[0])
        return rt_module_refuse(err, errlen, name, "the task descriptor has no name");
    m->task = t;
    return 0;
}

int rt_module_open(rt_module *m, const char *path, const char *name, char *err,
                   size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!name || !name[0])
        name = base_name(path);
    snprintf(m->name, sizeof m->name, "%s", name);
    int rc = check_elf(path, name, err, errlen);
    if (rc)
        return rc;
    m->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!m->handle)
        return fail_dl(err, errlen, name, path, "cannot load");
    rc = check_task(m, name, err, errlen);
    if (rc) {
        dlclose(m->handle);
        m->handle = NULL;
    }
    return rc;
}

ferry_fn_t rt_module_function(const rt_module *m, const char *fn)
{
    if (!m->task || !fn)
        return NULL;
    for (const ferry_function_t *f = m->task->functions; f && f->name; f++)
        if (strcmp(f->name, fn) == 0)
            return f->fn;
    return NULL;
}

void rt_module_list(const rt_module *m, char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = '\0';
    size_t used = 0;
    const ferry_function_t *f = m->task ? m->task->functions : NULL;
    for (; f && f->name; f++) {
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", f->name);
        if (n < 0 || (size_t)n >= len - used)
            return; /* truncated, still terminated */
        used += (size_t)n;
    }
    if (!used)
        snprintf(buf, len, "(none)");
}

void rt_module_close(rt_module *m)
{
    if (m->handle)
        dlclose(m->handle);
    m->handle = NULL;
    m->task = NULL;
}
