/* The data cache of one worker, and PutData: the files `ferry submit
 * --ship-data` sends to a worker that lacks them.
 *
 * A file lives in <state_dir>/data/<sha256>/<name>: its digest names its
 * directory, so that one path never holds two contents, and its own name is
 * kept, since the readers know a format by it. Chunks arrive in order into
 * <sha256>.part; the last one is followed by an fsync, the digest is
 * checked, and the file is renamed into place, so no reader sees half a
 * file or wrong bytes. A directory's mtime is when it was last used (put
 * or named by a training); past the cap, the least recently used go. One
 * transfer at a time: a worker receives files rarely, and one lock keeps
 * the cache's size simple to account for. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "runtime_int.h"

#define PATH_BUF 4096

struct rt_datacache {
    char *dir;
    uint64_t cap;
    pthread_mutex_t lock;
};

int rt_datacache_create(const char *dir, uint64_t cap, rt_datacache **out)
{
    int rc = conf_mkdirs(dir, 0700);
    if (rc)
        return rc;
    rt_datacache *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        return FERRY_ENOMEM;
    }
    c->cap = cap ? cap : RT_DATACACHE_DEFAULT_CAP;
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return 0;
}

void rt_datacache_destroy(rt_datacache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c->dir);
    free(c);
}

static bool is_sha256_hex(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return false;
    return n == 64;
}

/* A base name a file may be kept under: no directory, not "." or "..". */
static bool plain_name(const char *s)
{
    return s[0] && strlen(s) < 256 && !strchr(s, '/') && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

/* a/b into out[PATH_BUF]; false when it does not fit. */
static bool join(char *out, const char *a, const char *b)
{
    return conf_home_path(out, PATH_BUF, a, b) == 0;
}

/* Marks an entry used now, for the eviction's order. */
static void touch(const char *path)
{
    utimensat(AT_FDCWD, path, NULL, 0);
}

/* The bytes an entry's directory holds. */
static uint64_t entry_bytes(const char *dir)
{
    uint64_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    struct stat st;
    char path[PATH_BUF];
    while (d && (e = readdir(d))) {
        join(path, dir, e->d_name);
        if (e->d_name[0] != '.' && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
            n += (uint64_t)st.st_size;
    }
    if (d)
        closedir(d);
    return n;
}

static void remove_entry(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_BUF];
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        join(path, dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* An entry of the cache as the eviction sees it. */
typedef struct cache_entry {
    char name[65]; /* the digest */
    struct timespec used;
    uint64_t bytes;
} cache_entry;

static int by_use(const void *a, const void *b)
{
    const struct timespec *x = &((const cache_entry *)a)->used;
    const struct timespec *y = &((const cache_entry *)b)->used;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    return (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

/* The cache's entries and the bytes they hold, in one pass. Returns a
 * malloc'd array (NULL when there is none or memory ran out). */
static cache_entry *scan(rt_datacache *c, size_t *n, uint64_t *total)
{
    *n = 0;
    *total = 0;
    DIR *d = opendir(c->dir);
    if (!d)
        return NULL;
    cache_entry *all = NULL;
    size_t cap = 0;
    char path[PATH_BUF];
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d))) {
        if (!is_sha256_hex(e->d_name))
            continue;
        join(path, c->dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (*n == cap) {
            size_t grown = cap ? 2 * cap : 16;
            cache_entry *more = realloc(all, grown * sizeof *all);
            if (!more) {
                /* Counted, if not a candidate: the cap still holds. */
                *total += entry_bytes(path);
                continue;
            }
            all = more;
            cap = grown;
        }
        cache_entry *ce = &all[(*n)++];
        memcpy(ce->name, e->d_name, sizeof ce->name);
        ce->used = st.st_mtim;
        ce->bytes = entry_bytes(path);
        *total += ce->bytes;
    }
    closedir(d);
    return all;
}

/* Removes the least recently used entries but `keep` until the cache holds
 * at most its cap. Under c->lock. */
static void evict(rt_datacache *c, const char *keep)
{
    size_t n;
    uint64_t total;
    cache_entry *all = scan(c, &n, &total);
    if (n && total > c->cap)
        qsort(all, n, sizeof *all, by_use);
    char path[PATH_BUF];
    for (size_t i = 0; i < n && total > c->cap; i++) {
        if (strcmp(all[i].name, keep) == 0)
            continue;
        join(path, c->dir, all[i].name);
        fprintf(stderr, "ferry worker: data cache over %llu bytes: evicting %s\n",
                (unsigned long long)c->cap, path);
        remove_entry(path);
        total -= all[i].bytes;
    }
    free(all);
}

/* The hex SHA-256 of the `size` bytes of the file at `path`. */
static int file_sha256(const char *path, uint64_t size, char hex[RT_SHA256_HEX])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = rt_sha256_fd(fd, size, hex);
    close(fd);
    return rc;
}

/* Whether <sha>/<name> is there; an entry there under another name gets
 * this one too (a hard link: one content, both names). */
static bool have(rt_datacache *c, const char *sha, const char *name)
{
    char dir[PATH_BUF], path[PATH_BUF], other[PATH_BUF];
    join(dir, c->dir, sha);
    join(path, dir, name);
    if (access(path, R_OK) == 0) {
        touch(dir);
        return true;
    }
    DIR *d = opendir(dir);
    struct dirent *e;
    bool linked = false;
    while (d && !linked && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        join(other, dir, e->d_name);
        linked = link(other, path) == 0;
    }
    if (d)
        closedir(d);
    if (linked)
        touch(dir);
    return linked;
}

/* Appends the chunk to <sha>.part; the last one checks and files it. */
static int put_chunk(rt_datacache *c, const proto_put_data_req *in, rpc_msg *req,
                     uint64_t *received, char *why, size_t whylen)
{
    char part[PATH_BUF], dir[PATH_BUF], path[PATH_BUF];
    char partname[80];
    snprintf(partname, sizeof partname, "%s.part", in->sha256);
    if (!join(part, c->dir, partname))
        return base_errf(why, whylen, FERRY_ERANGE, "data cache path too long");
    struct stat st;
    uint64_t at = stat(part, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (in->offset != at) {
        /* A sender that died mid-file left the rest: its retry starts at 0. */
        if (in->offset == 0) {
            unlink(part);
            at = 0;
        } else {
            *received = at;
            return base_errf(
                why, whylen, FERRY_EINVAL, "chunk at %llu of %s, but %llu bytes are in",
                (unsigned long long)in->offset, in->name, (unsigned long long)at);
        }
    }
    if (in->offset + req->payload_len > in->size)
        return base_errf(why, whylen, FERRY_EINVAL,
                         "chunk past the end of %s (%llu bytes)", in->name,
                         (unsigned long long)in->size);
    int fd = open(part, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return base_errf(why, whylen, -errno, "cannot write %s: %s", part,
                         strerror(errno));
    rpc_payload pl;
    rpc_msg_take_runs(req, &pl);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < pl.n_runs; i++)
        if (base_write_all(fd, pl.runs[i].p, pl.runs[i].len) != 0)
            rc = base_errf(why, whylen, FERRY_EIO, "cannot write %s: %s", part,
                           strerror(errno));
    size_t got_len = pl.len;
    rpc_payload_fini(&pl);
    *received = at + (rc ? 0 : got_len);
    if (rc || *received < in->size) {
        close(fd);
        return rc;
    }
    char got[RT_SHA256_HEX];
    if (fsync(fd) != 0)
        rc = base_errf(why, whylen, FERRY_EIO, "cannot sync %s", part);
    close(fd);
    if (rc == 0 && (rc = file_sha256(part, in->size, got)) == 0 &&
        strcmp(got, in->sha256) != 0)
        rc = base_errf(why, whylen, FERRY_EINVAL,
                       "%s arrived with sha256 %s, not the %s it was sent as", in->name,
                       got, in->sha256);
    join(dir, c->dir, in->sha256);
    join(path, dir, in->name);
    if (rc == 0 &&
        ((mkdir(dir, 0700) != 0 && errno != EEXIST) || rename(part, path) != 0))
        rc = base_errf(why, whylen, -errno, "cannot file %s: %s", path, strerror(errno));
    if (rc) {
        unlink(part);
        *received = 0;
        return rc;
    }
    touch(dir);
    evict(c, in->sha256);
    return 0;
}

void rt_put_data_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_datacache *c = ((rt_worker *)data)->datacache;
    proto_put_data_req *in;
    if (proto_put_data_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "PutData: request is not a PutDataRequest");
        return;
    }
    char why[512] = "";
    int rc = 0;
    proto_put_data_reply out = {0};
    if (!is_sha256_hex(in->sha256) || !plain_name(in->name))
        rc = base_errf(why, sizeof why, FERRY_EINVAL,
                       "a data file needs a sha256 (64 lowercase hex digits) and a plain "
                       "file name");
    else if (in->size > c->cap)
        rc =
            base_errf(why, sizeof why, FERRY_EINVAL,
                      "%s is %llu bytes, over this worker's data cache of %llu", in->name,
                      (unsigned long long)in->size, (unsigned long long)c->cap);
    pthread_mutex_lock(&c->lock);
    if (rc == 0 && !(out.have = have(c, in->sha256, in->name)) && req->payload_len)
        rc = put_chunk(c, in, req, &out.received, why, sizeof why);
    out.have = rc == 0 && (out.have || out.received == in->size);
    pthread_mutex_unlock(&c->lock);
    proto_free(in);
    if (rc) {
        rpc_srv_fail(sc, rc, "PutData: %s", why);
        return;
    }
    proto_bytes head;
    rt_reply_packed(sc, proto_put_data_reply_pack(&out, &head), &head, "PutData");
}

/* A shipped directory: its listing ("<sha256> <name>" lines, the file
 * RT_DATA_DIR_LISTING of entry `dir`) names files the cache holds, each
 * linked into `dir` under its name. Under c->lock. */
static int materialise_dir(rt_datacache *c, const char *dir, char *why, size_t whylen)
{
    char listing[PATH_BUF], line[512], src[PATH_BUF], dst[PATH_BUF], blob[PATH_BUF];
    if (!join(listing, dir, RT_DATA_DIR_LISTING))
        return FERRY_ERANGE;
    FILE *f = fopen(listing, "r");
    if (!f)
        return base_errf(why, whylen, -errno, "cannot read %s: %s", listing,
                         strerror(errno));
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *name = strchr(line, ' ');
        if (!name || (*name++ = '\0', !is_sha256_hex(line)) || !plain_name(name)) {
            rc = base_errf(why, whylen, FERRY_ECORRUPT, "%s: not a directory listing",
                           listing);
            break;
        }
        if (!have(c, line, name)) {
            rc = base_errf(why, whylen, FERRY_ENOENT,
                           "the data file %s (sha256 %s) is not in this worker's data "
                           "cache: ship it again with --ship-data",
                           name, line);
            break;
        }
        if (!join(blob, c->dir, line) || !join(src, blob, name) || !join(dst, dir, name))
            rc = FERRY_ERANGE;
        else if (link(src, dst) != 0 && errno != EEXIST)
            rc = base_errf(why, whylen, -errno, "cannot link %s: %s", dst,
                           strerror(errno));
    }
    fclose(f);
    return rc;
}

int rt_datacache_resolve(rt_datacache *c, const char *ref, char *out, size_t len,
                         char *why, size_t whylen)
{
    const char *rest = ref + strlen(RT_DATA_REF_PREFIX);
    const char *slash = strchr(rest, '/');
    char sha[65];
    if (!slash || slash - rest != 64)
        return base_errf(why, whylen, FERRY_EINVAL, "'%s' names no shipped data file",
                         ref);
    memcpy(sha, rest, 64);
    sha[64] = '\0';
    if (!is_sha256_hex(sha) || !plain_name(slash + 1))
        return base_errf(why, whylen, FERRY_EINVAL, "'%s' names no shipped data file",
                         ref);
    bool listing = strcmp(slash + 1, RT_DATA_DIR_LISTING) == 0;
    char dir[PATH_BUF];
    if (!join(dir, c->dir, sha))
        return FERRY_ERANGE;
    pthread_mutex_lock(&c->lock);
    int rc = have(c, sha, slash + 1)
                 ? 0
                 : base_errf(
                       why, whylen, FERRY_ENOENT,
                       "the data file %s (sha256 %s) is not in this worker's data cache: "
                       "ship it again with --ship-data",
                       slash + 1, sha);
    if (rc == 0 && listing)
        rc = materialise_dir(c, dir, why, whylen);
    pthread_mutex_unlock(&c->lock);
    if (rc)
        return rc;
    int n = listing ? snprintf(out, len, "%s", dir)
                    : snprintf(out, len, "%s/%s", dir, slash + 1);
    return n > 0 && (size_t)n < len ? 0 : FERRY_ERANGE;
}
