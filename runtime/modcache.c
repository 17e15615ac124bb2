/* The content-addressed module cache of one worker, and LoadModule.
 *
 * A module lives in <state_dir>/cache/<sha256>.so. The file name is its
 * digest, so one path never holds two contents: glibc matches dlopen by
 * path and would silently hand back an older module at a reused one. Bytes
 * land in a temporary file first and are renamed into place, so no reader
 * ever sees half a module. Loads are serialised (they are rare and each
 * dlopen takes the loader's lock anyway); lookups by Call only take the
 * list lock for a moment. Modules stay loaded until the worker ends, so a
 * pointer handed out stays valid while any call runs. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "runtime_int.h"

#define PATH_BUF 4096

typedef struct entry {
    rt_module m;
    struct entry *next;
} entry;

struct rt_modcache {
    char *dir;
    pthread_mutex_t lock;      /* guards head and count */
    pthread_mutex_t load_lock; /* one load at a time */
    entry *head;
    size_t count;
};

int rt_modcache_create(const char *dir, rt_modcache **out)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -errno;
    rt_modcache *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        return FERRY_ENOMEM;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->load_lock, NULL);
    *out = c;
    return 0;
}

void rt_modcache_destroy(rt_modcache *c)
{
    if (!c)
        return;
    for (entry *e = c->head, *next; e; e = next) {
        next = e->next;
        rt_module_close(&e->m);
        free(e);
    }
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->load_lock);
    free(c->dir);
    free(c);
}

const rt_module *rt_modcache_find(rt_modcache *c, const char *sha)
{
    const rt_module *m = NULL;
    pthread_mutex_lock(&c->lock);
    for (entry *e = c->head; e; e = e->next) {
        if (strcmp(e->m.sha256, sha) == 0) {
            m = &e->m;
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return m;
}

size_t rt_modcache_count(rt_modcache *c)
{
    pthread_mutex_lock(&c->lock);
    size_t n = c->count;
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* The digest becomes a file name: only exactly 64 lower-case hex digits may. */
static bool is_sha256_hex(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return false;
    return n == RT_SHA256_HEX - 1;
}

/* A file left by an earlier run of this worker counts only if it still
 * hashes to its name. */
static bool stored_intact(const char *path, const char *sha)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool ok = false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            char hex[RT_SHA256_HEX];
            rt_sha256_hex(p, (size_t)st.st_size, hex);
            ok = strcmp(hex, sha) == 0;
            munmap(p, (size_t)st.st_size);
        }
    }
    close(fd);
    return ok;
}

int rt_modcache_load(rt_modcache *c, const char *sha, const char *name, const void *bytes,
                     size_t len, const rt_module **out, bool *cached, char *err,
                     size_t errlen)
{
    *out = NULL;
    *cached = false;
    if (!sha || !is_sha256_hex(sha)) {
        snprintf(err, errlen, "module %s: sha256 '%s' is not 64 lower-case hex digits",
                 name, sha ? sha : "");
        return FERRY_EINVAL;
    }
    if (len) {
        char hex[RT_SHA256_HEX];
        rt_sha256_hex(bytes, len, hex);
        if (strcmp(hex, sha) != 0) {
            snprintf(err, errlen,
                     "module %s: sha256 mismatch: its %zu bytes hash to %s, the request "
                     "says %s",
                     name, len, hex, sha);
            return FERRY_ECORRUPT;
        }
    }

    pthread_mutex_lock(&c->load_lock);
    int rc = 0;
    const rt_module *m = rt_modcache_find(c, sha);
    if (m) {
        *cached = true;
        goto done;
    }
    char path[PATH_BUF];
    if (snprintf(path, sizeof path, "%s/%s.so", c->dir, sha) >= (int)sizeof path) {
        snprintf(err, errlen, "module %s: cache path too long", name);
        rc = FERRY_ERANGE;
        goto done;
    }
    if (len) {
        if ((rc = base_write_atomic(path, bytes, len, false))) {
            snprintf(err, errlen, "module %s: cannot write %s: %s", name, path,
                     strerror(-rc));
            goto done;
        }
    } else if (stored_intact(path, sha)) {
        *cached = true; /* the bytes came with an earlier run */
    } else {
        unlink(path);
        snprintf(err, errlen, "module %s (%s) not cached: send its bytes", name, sha);
        rc = FERRY_ENOENT;
        goto done;
    }

    entry *e = calloc(1, sizeof *e);
    if (!e) {
        unlink(path);
        snprintf(err, errlen, "module %s: out of memory", name);
        rc = FERRY_ENOMEM;
        goto done;
    }
    rt_crash_mark(name, NULL);
    rc = rt_module_open(&e->m, path, name, err, errlen);
    rt_crash_mark(NULL, NULL);
    if (rc) {
        /* Nothing keeps a module that cannot run. */
        unlink(path);
        free(e);
        *cached = false;
        goto done;
    }
    memcpy(e->m.sha256, sha, RT_SHA256_HEX);
    pthread_mutex_lock(&c->lock);
    e->next = c->head;
    c->head = e;
    c->count++;
    pthread_mutex_unlock(&c->lock);
    m = &e->m;

done:
    pthread_mutex_unlock(&c->load_lock);
    *out = m;
    return rc;
}

void rt_load_module(rpc_srv_call *sc, rt_worker *w, const char *sha, const char *name,
                    const rpc_msg *req)
{
    if (!name[0])
        name = "(unnamed)";
    const rt_module *m;
    bool cached;
    char err[1024];
    int rc = rt_modcache_load(w->cache, sha, name, req->payload, req->payload_len, &m,
                              &cached, err, sizeof err);
    if (rc) {
        rpc_srv_fail(sc, rc, "%s", err);
        return;
    }

    size_t n = 0;
    for (const ferry_function_t *f = m->task->functions; f && f->name; f++)
        n++;
    char **names = calloc(n ? n : 1, sizeof *names);
    if (!names) {
        rpc_srv_fail(sc, FERRY_ENOMEM, "LoadModule: out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = (char *)m->task->functions[i].name;
    proto_load_module_reply out = {.task_name = (char *)m->task->name,
                                   .n_functions = n,
                                   .functions = names,
                                   .cached = cached};
    proto_bytes head;
    rc = proto_load_module_reply_pack(&out, &head);
    free(names);
    rt_reply_packed(sc, rc, &head, "LoadModule");
}
