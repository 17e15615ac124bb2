/* The crash record: which function was running when the worker died.
 *
 * A task function that faults takes the whole worker down; nothing can be
 * sent to the master from a signal handler. So the handler leaves one line
 * in <state_dir>/crash, "<crash_id> module M function F: signal N (NAME)"
 * ("module M while loading: ..." when it died in the module's constructors),
 * and the worker the supervisor starts next reads it and reports it in
 * Ping and Stats. The handler uses async-signal-safe calls only (open,
 * write, close, clock_gettime, raise): no stdio, no malloc, its own number
 * formatting. Then, for a crash inside a task, it adds what only unsafe
 * calls can say (crash_frames.c: which callback, and the module's frames,
 * symbolised) and rewrites the record with it, under an alarm that ends the
 * worker if they hang; the plain record stands if they never finish.
 *
 * A function that exhausts its stack faults on the guard page, where no
 * handler can run on the same stack; so the handler runs on an alternate
 * signal stack (SA_ONSTACK), which each executor thread gets the first time
 * it is marked as running a call. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime_int.h"

static char record_path[4096];

static _Thread_local const char *cur_module;
static _Thread_local const char *cur_function;

/* The alternate stacks we made, one per thread, freed as the thread ends. */
static pthread_key_t altstack_key;
static bool altstack_key_ok;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;
static _Thread_local bool altstack_checked;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* ---- async-signal-safe formatting ---------------------------------------- */

typedef struct line {
    char buf[RT_CRASH_TEXT];
    size_t len;
} line;

static void put_str(line *l, const char *s)
{
    while (*s && l->len < sizeof l->buf - 1)
        l->buf[l->len++] = *s++;
}

static void put_u64(line *l, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && l->len < sizeof l->buf - 1)
        l->buf[l->len++] = digits[--n];
}

static void put_hex(line *l, uint64_t v)
{
    char digits[16];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v % 16];
        v /= 16;
    } while (v);
    put_str(l, "0x");
    while (n && l->len < sizeof l->buf - 1)
        l->buf[l->len++] = digits[--n];
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGILL:
        return "SIGILL";
    case SIGFPE:
        return "SIGFPE";
    case SIGABRT:
        return "SIGABRT";
    default:
        return "signal";
    }
}

static void write_line(int fd, const line *l)
{
    size_t off = 0;
    while (off < l->len) {
        ssize_t n = write(fd, l->buf + off, l->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        off += (size_t)n;
    }
}

/* ---- guard pages (guard.c) ------------------------------------------------ */

/* Read by the handler without a lock: a slot is filled before its page is
 * published, and cleared by its page first. */
typedef struct guard_rec {
    _Atomic uintptr_t page;
    size_t len, bytes;
    const char *what;
} guard_rec;

static guard_rec guards[64];
static pthread_mutex_t guards_lock = PTHREAD_MUTEX_INITIALIZER;

void rt_crash_guard(const void *page, size_t len, const char *what, size_t bytes)
{
    pthread_mutex_lock(&guards_lock);
    for (size_t i = 0; i < sizeof guards / sizeof guards[0]; i++) {
        if (atomic_load(&guards[i].page) == 0) {
            guards[i].len = len;
            guards[i].bytes = bytes;
            guards[i].what = what;
            atomic_store(&guards[i].page, (uintptr_t)page);
            break;
        }
    }
    pthread_mutex_unlock(&guards_lock); /* no room: it still faults, unnamed */
}

void rt_crash_unguard(const void *page)
{
    pthread_mutex_lock(&guards_lock);
    for (size_t i = 0; i < sizeof guards / sizeof guards[0]; i++)
        if (atomic_load(&guards[i].page) == (uintptr_t)page)
            atomic_store(&guards[i].page, 0);
    pthread_mutex_unlock(&guards_lock);
}

/* ", N bytes past the end of WHAT (B bytes)" when addr is in a guard page. */
static void put_guard(line *l, uintptr_t addr)
{
    for (size_t i = 0; i < sizeof guards / sizeof guards[0]; i++) {
        uintptr_t page = atomic_load(&guards[i].page);
        if (page && addr >= page && addr - page < guards[i].len) {
            put_str(l, ", ");
            put_u64(l, addr - page);
            put_str(l, " bytes past the end of ");
            put_str(l, guards[i].what);
            put_str(l, " (");
            put_u64(l, guards[i].bytes);
            put_str(l, " bytes)");
            return;
        }
    }
}

static void save(const line *rec)
{
    int fd = open(record_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        write_line(fd, rec);
        close(fd);
    }
}

/* Room for the frames' text beside the record; static, not on the
 * alternate stack. */
static char frames_text[RT_CRASH_TEXT];
/* How long the unsafe part may take before SIGALRM ends the worker. */
#define FRAMES_ALARM_S 3

static void on_fatal(int sig, siginfo_t *si, void *ucontext)
{
    int saved = errno;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t id = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;

    line rec = {.len = 0};
    put_u64(&rec, id ? id : 1);
    put_str(&rec, " ");
    size_t text = rec.len;
    const char *module = cur_module, *function = cur_function;
    if (module) {
        put_str(&rec, "module ");
        put_str(&rec, module);
        if (function) {
            put_str(&rec, " function ");
            put_str(&rec, function);
        } else {
            put_str(&rec, " while loading"); /* its constructors run in dlopen */
        }
    } else {
        put_str(&rec, "outside any call");
    }
    put_str(&rec, ": signal ");
    put_u64(&rec, (uint64_t)sig);
    put_str(&rec, " (");
    put_str(&rec, signal_name(sig));
    put_str(&rec, ")");
    if (si && sig != SIGABRT) {
        put_str(&rec, " at address ");
        put_hex(&rec, (uint64_t)(uintptr_t)si->si_addr);
        if (sig == SIGSEGV)
            put_guard(&rec, (uintptr_t)si->si_addr);
    }
    size_t plain = rec.len;
    put_str(&rec, "\n");
    save(&rec);

    if (module && function) {
        alarm(FRAMES_ALARM_S);
        if (rt_crash_frames(ucontext, module, frames_text, sizeof frames_text)) {
            rec.len = plain;
            put_str(&rec, frames_text);
            put_str(&rec, "\n");
            save(&rec);
        }
        alarm(0);
    }
    line msg = {.len = 0};
    put_str(&msg, "ferry worker: crashed: ");
    put_str(&msg, rec.buf + text);
    write_line(STDERR_FILENO, &msg);

    /* What the tasks forked dies with the worker (reap.c). */
    rt_reap_descendants();

    /* SA_RESETHAND restored the default action; the signal is blocked until
     * this handler returns, and then kills the process with the same
     * status (a fault re-executes the faulting instruction anyway). */
    raise(sig);
    errno = saved;
}

/* ---- alternate signal stacks --------------------------------------------- */

static void altstack_free(void *mem)
{
    /* Disabled before it is freed, unless someone replaced it meanwhile. */
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == mem &&
        !(cur.ss_flags & SS_DISABLE)) {
        stack_t off = {.ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
    }
    free(mem);
}

static void altstack_key_create(void)
{
    altstack_key_ok = pthread_key_create(&altstack_key, altstack_free) == 0;
}

/* Gives the calling thread an alternate signal stack unless it has one
 * (sanitizers install their own per thread: that one is kept). Without one
 * a stack overflow still kills the worker, only with no record. */
static void altstack_ensure(void)
{
    if (altstack_checked)
        return;
    altstack_checked = true;
    stack_t old;
    if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE))
        return;
    if (pthread_once(&altstack_once, altstack_key_create) != 0 || !altstack_key_ok)
        return;
    /* libdwfl, naming the frames, needs more than a plain handler. */
    size_t size = 4 * (size_t)SIGSTKSZ;
    if (size < 256 * 1024)
        size = 256 * 1024;
    void *mem = malloc(size);
    if (!mem)
        return;
    stack_t ss = {.ss_sp = mem, .ss_size = size};
    if (sigaltstack(&ss, NULL) != 0) {
        free(mem);
        return;
    }
    if (pthread_setspecific(altstack_key, mem) != 0)
        altstack_free(mem);
}

int rt_crash_install(const char *path)
{
    size_t n = strlen(path);
    if (n >= sizeof record_path)
        return FERRY_ERANGE;
    memcpy(record_path, path, n + 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_RESETHAND | SA_ONSTACK | SA_SIGINFO;
    rt_crash_frames_prepare();
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        if (sigaction(fatal_signals[i], &sa, NULL) != 0)
            return -errno;
    return 0;
}

void rt_crash_mark(const char *module, const char *function)
{
    /* The handler runs on this same thread and trusts the pair once module
     * is set: set function first, clear module first, and keep the compiler
     * from reordering the two (a signal fence is all a same-thread handler
     * needs). */
    if (module) {
        altstack_ensure();
        cur_function = function;
        atomic_signal_fence(memory_order_seq_cst);
        cur_module = module;
    } else {
        cur_module = NULL;
        atomic_signal_fence(memory_order_seq_cst);
        cur_function = NULL;
    }
}

void rt_crash_note(const char *text)
{
    if (!record_path[0])
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    FILE *f = fopen(record_path, "we");
    if (!f)
        return;
    char one[RT_CRASH_TEXT - 32]; /* one line, as rt_crash_read takes it */
    snprintf(one, sizeof one, "%s", text);
    one[strcspn(one, "\n")] = '\0';
    fprintf(f, "%llu %s\n", (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec, one);
    fclose(f);
}

void rt_crash_read(const char *path, rt_identity *id)
{
    id->last_crash[0] = '\0';
    id->crash_id = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char buf[RT_CRASH_TEXT];
    if (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        char *rest = NULL;
        errno = 0;
        unsigned long long v = strtoull(buf, &rest, 10);
        if (errno == 0 && rest != buf && *rest == ' ' && v != 0) {
            id->crash_id = v;
            snprintf(id->last_crash, sizeof id->last_crash, "%s", rest + 1);
        }
    }
    fclose(f);
}
