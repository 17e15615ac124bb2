/* tests/multihost — the hosts' namespaces: the keeper that holds them, the
 * plumbing (ip, tc) and the commands started on a host. */
#include "mhnet.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MH_LOSSY_LINK
#define MH_LOSSY_LINK "" /* not built: mh_netem() says so where it needs it */
#endif

static bool find_tool(const char *name, char *out, size_t len)
{
    /* root's usual directories too: a PATH without /usr/sbin still runs ip */
    char path[4096];
    const char *env = getenv("PATH");
    snprintf(path, sizeof path, "%s:/usr/sbin:/usr/bin:/sbin:/bin", env ? env : "");
    for (char *save = NULL, *dir = strtok_r(path, ":", &save); dir;
         dir = strtok_r(NULL, ":", &save)) {
        if (!*dir)
            continue;
        snprintf(out, len, "%s/%s", dir, name);
        if (access(out, X_OK) == 0)
            return true;
    }
    out[0] = '\0';
    return false;
}

mh_lack mh_unavailable(char *why, size_t len)
{
    char p[256];
    if (geteuid() != 0) {
        snprintf(why, len,
                 "not root: network namespaces, veth pairs and tc netem need root");
        return MH_NOT_ROOT;
    }
    if (!find_tool("ip", p, sizeof p) || !find_tool("tc", p, sizeof p)) {
        snprintf(why, len, "no ip or tc command (package iproute2)");
        return MH_NO_IP;
    }
    if (!find_tool("nsenter", p, sizeof p)) {
        snprintf(why, len, "no nsenter command (package util-linux)");
        return MH_NO_NSENTER;
    }
    why[0] = '\0';
    return MH_CAN_RUN;
}

/* Whether process `pid` has exited (gone, or a zombie nobody reaped yet). */
static bool exited(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return true;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return true;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

/* ---- the keeper -------------------------------------------------------------- */

typedef struct keeper_msg {
    int32_t err; /* errno of what failed, or 0 */
    int32_t init;
    char what[64];
} keeper_msg;

/* The keeper's messages are a few bytes, under PIPE_BUF: each is written,
 * and read, whole by one call. */
static bool put_msg(int fd, const void *p, size_t n)
{
    ssize_t w;
    while ((w = write(fd, p, n)) < 0 && errno == EINTR)
        ;
    return w == (ssize_t)n;
}

static bool get_msg(int fd, void *p, size_t n)
{
    ssize_t r;
    while ((r = read(fd, p, n)) < 0 && errno == EINTR)
        ;
    return r == (ssize_t)n;
}

/* PID 1 of the hosts' PID namespace: a /proc of its own namespace (so that
 * what runs there reads its own pids), then it reaps every orphan (a
 * supervisor that `ferry start` leaves behind) until it is killed. */
static _Noreturn void init_main(int up)
{
    int32_t e = 0;
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        e = errno;
    put_msg(up, &e, sizeof e);
    close(up);
    if (e)
        _exit(1);
    for (;;)
        if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD)
            usleep(100000);
}

static _Noreturn void keeper_fail(int up, keeper_msg *m, const char *what)
{
    m->err = errno ? errno : EIO;
    snprintf(m->what, sizeof m->what, "%s", what);
    put_msg(up, m, sizeof *m);
    _exit(1);
}

/* The keeper: new mount, PID and network namespaces (this last one empty,
 * so that a plumbing command that forgets its -n changes nothing of the
 * machine's), a /run of their own for ip's namespace names, and their PID 1
 * (init_main). It lives as long as PID 1 does, and dies with us. */
static _Noreturn void keeper_main(int up, pid_t parent)
{
    keeper_msg m = {0};
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET) != 0)
        keeper_fail(up, &m, "unshare");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        keeper_fail(up, &m, "making / private");
    if (mount("ferry-hosts", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
        keeper_fail(up, &m, "mounting a tmpfs on /run");
    int q[2];
    if (pipe2(q, O_CLOEXEC) != 0)
        keeper_fail(up, &m, "pipe");
    pid_t self = getpid();
    pid_t init = fork();
    if (init < 0)
        keeper_fail(up, &m, "fork");
    if (init == 0) {
        close(q[0]);
        close(up);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* The keeper may have died before that: this /proc still numbers
         * processes as it does, until init_main mounts its own. */
        if (exited(self))
            _exit(1);
        init_main(q[1]);
    }
    close(q[1]);
    int32_t e = 0;
    if (!get_msg(q[0], &e, sizeof e))
        e = ECHILD;
    close(q[0]);
    m.err = e;
    m.init = init;
    snprintf(m.what, sizeof m.what, "mounting /proc in the new PID namespace");
    put_msg(up, &m, sizeof m);
    close(up);
    if (e)
        _exit(1);
    while (waitpid(init, NULL, 0) < 0 && errno == EINTR)
        ;
    _exit(0);
}

static int start_keeper(mh_net *net, char *err, size_t len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, len, "pipe: %s", strerror(errno));
        return -errno;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]), close(p[1]);
        snprintf(err, len, "fork: %s", strerror(e));
        return -e;
    }
    if (pid == 0) {
        close(p[0]);
        keeper_main(p[1], parent);
    }
    close(p[1]);
    net->keeper = pid;
    keeper_msg m;
    bool got = get_msg(p[0], &m, sizeof m);
    close(p[0]);
    if (!got) {
        snprintf(err, len, "the namespaces' keeper died at its start");
        return -EIO;
    }
    if (m.err) {
        m.what[sizeof m.what - 1] = '\0';
        snprintf(err, len, "%s: %s", m.what, strerror(m.err));
        return -m.err;
    }
    net->init = m.init;
    return 0;
}

/* ---- commands in the namespaces ---------------------------------------------- */

size_t mh_argv(const mh_net *net, int host, const char *const *cmd, const char **out,
               size_t max)
{
    static char target[16];
    snprintf(target, sizeof target, "%d", (int)net->init);
    const char *head[] = {net->nsenter, "--target", target, "--mount", "--pid", "--net",
                          /* the target's working directory: ours when it began */
                          "--wd", "--"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        if (n < max)
            out[n++] = head[i];
    if (host >= 0) {
        const char *ipx[] = {net->ip, "netns", "exec", net->ns[host]};
        for (size_t i = 0; i < 4; i++)
            if (n < max)
                out[n++] = ipx[i];
    }
    for (size_t i = 0; cmd[i]; i++)
        if (n < max)
            out[n++] = cmd[i];
    if (n >= max)
        return 0;
    out[n] = NULL;
    return n;
}

static void redirect(const char *path, int fd)
{
    if (!path)
        return;
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f < 0 || dup2(f, fd) < 0)
        _exit(127);
}

/* fork + exec of argv in a new process group; out_fd and err_fd (>= 0)
 * become its stdout and stderr, else `out`'s and `err`'s files. */
static pid_t start(const char *const *argv, const char *const *env, const char *out,
                   int out_fd, const char *err, int err_fd)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        setpgid(0, 0);
        int in = open("/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0)
            _exit(127);
        if (out_fd >= 0)
            dup2(out_fd, 1);
        else
            redirect(out, 1);
        if (err_fd >= 0)
            dup2(err_fd, 2);
        else
            redirect(err, 2);
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execv(argv[0], (char *const *)argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

static pid_t spawn(const mh_net *net, int host, const char *const *cmd,
                   const char *const *env, const char *out, const char *err, int fd)
{
    const char *argv[64];
    if (!mh_argv(net, host, cmd, argv, 64))
        return -E2BIG;
    return start(argv, env, out, fd, err, fd);
}

pid_t mh_spawn(const mh_net *net, int host, const char *const *cmd,
               const char *const *env, const char *out, const char *err)
{
    return spawn(net, host, cmd, env, out, err, -1);
}

pid_t mh_spawn_fd(const mh_net *net, int host, const char *const *cmd, int out_fd)
{
    return spawn(net, host, cmd, NULL, NULL, NULL, out_fd);
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int mh_wait(pid_t pid, int timeout_ms)
{
    int64_t until = now_ms() + timeout_ms;
    int status;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (w < 0 && errno != EINTR)
            return -1;
        if (now_ms() > until) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(5000);
    }
}

int mh_sh(const mh_net *net, char *err, size_t len, const char *fmt, ...)
{
    char script[8192];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(script, sizeof script, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof script) {
        snprintf(err, len, "shell command too long");
        return -1;
    }
    const char *cmd[] = {"/bin/sh", "-c", script, NULL};
    const char *argv[32];
    int p[2];
    if (!mh_argv(net, -1, cmd, argv, 32) || pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, len, "cannot run the shell");
        return -1;
    }
    pid_t pid = start(argv, NULL, NULL, -1, NULL, p[1]);
    close(p[1]);
    size_t got = 0;
    char buf[1024];
    for (ssize_t r; (r = read(p[0], buf, sizeof buf)) != 0;) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        for (ssize_t i = 0; i < r && got + 1 < len; i++)
            err[got++] = buf[i];
    }
    close(p[0]);
    if (len)
        err[got < len ? got : len - 1] = '\0';
    int status = pid > 0 ? mh_wait(pid, 60000) : -1;
    if (status != 0 && got == 0)
        snprintf(err, len, "`%s` exited %d", script, status);
    return status == 0 ? 0 : -1;
}

/* ---- the hosts ---------------------------------------------------------------- */

size_t mh_veth_script(const mh_net *net, int i, char *s, size_t len)
{
    /* A fixed MAC: a link remade for a host (mh_netem's emulated one, and
     * the veth pair put back after it) keeps what its neighbours' ARP
     * caches hold for its address. */
    return (size_t)snprintf(s, len,
                            "$ip -n %s link add v%d type veth peer name " MH_HOST_IF
                            " netns %s\n"
                            "$ip -n %s link set v%d master br0 up\n"
                            "$ip -n %s link set " MH_HOST_IF " address " MH_MAC_FMT "\n"
                            "$ip -n %s addr add %s/24 dev " MH_HOST_IF "\n"
                            "$ip -n %s link set " MH_HOST_IF " up\n",
                            net->bridge, i, net->ns[i], net->bridge, i, net->ns[i], i + 1,
                            net->ns[i], net->addr[i], net->ns[i]);
}

/* The plumbing: the bridge's namespace, then each host's namespace with
 * one end of a veth pair (the other end on the bridge) and its address. */
static int plumb(mh_net *net, char *err, size_t len)
{
    char s[8192];
    size_t n =
        (size_t)snprintf(s, sizeof s,
                         "set -e\n"
                         "ip=%s\n"
                         "$ip netns add %s\n"
                         "$ip -n %s link set lo up\n"
                         "$ip -n %s link add br0 type bridge\n"
                         "$ip -n %s link set br0 up\n",
                         net->ip, net->bridge, net->bridge, net->bridge, net->bridge);
    for (int i = 0; i < net->n && n < sizeof s; i++) {
        n += (size_t)snprintf(s + n, sizeof s - n,
                              "$ip netns add %s\n"
                              "$ip -n %s link set lo up\n",
                              net->ns[i], net->ns[i]);
        if (n < sizeof s)
            n += mh_veth_script(net, i, s + n, sizeof s - n);
    }
    if (n >= sizeof s) {
        snprintf(err, len, "plumbing script too long");
        return -1;
    }
    return mh_sh(net, err, len, "%s", s);
}

int mh_net_up(mh_net *net, int hosts, char *err, size_t len)
{
    memset(net, 0, sizeof *net);
    if (hosts < 1 || hosts > MH_MAX_HOSTS) {
        snprintf(err, len, "%d hosts: 1 to %d", hosts, MH_MAX_HOSTS);
        return -EINVAL;
    }
    if (!find_tool("ip", net->ip, sizeof net->ip) ||
        !find_tool("tc", net->tc, sizeof net->tc) ||
        !find_tool("nsenter", net->nsenter, sizeof net->nsenter)) {
        snprintf(err, len, "ip, tc or nsenter missing");
        return -ENOENT;
    }
    snprintf(net->lossy, sizeof net->lossy, "%s", MH_LOSSY_LINK);
    net->n = hosts;
    snprintf(net->prefix, sizeof net->prefix, "ferry-%d-", (int)getpid());
    snprintf(net->bridge, sizeof net->bridge, "%sbr", net->prefix);
    for (int i = 0; i < hosts; i++) {
        snprintf(net->ns[i], sizeof net->ns[i], "%sh%d", net->prefix, i);
        snprintf(net->addr[i], sizeof net->addr[i], MH_SUBNET ".%d", i + 1);
    }
    int rc = start_keeper(net, err, len);
    if (rc == 0 && plumb(net, err, len) != 0)
        rc = -EIO;
    if (rc)
        mh_net_down(net);
    return rc;
}

void mh_net_down(mh_net *net)
{
    if (net->keeper <= 0)
        return;
    /* The keeper's death SIGKILLs PID 1, and the kernel every process of
     * its namespace; the namespaces go with the last of them. */
    kill(net->keeper, SIGKILL);
    while (waitpid(net->keeper, NULL, 0) < 0 && errno == EINTR)
        ;
    /* an emulated link's process went with PID 1; its nsenter is ours */
    for (int i = 0; i < MH_MAX_HOSTS; i++)
        if (net->link_pid[i] > 0) {
            kill(-net->link_pid[i], SIGKILL);
            while (waitpid(net->link_pid[i], NULL, 0) < 0 && errno == EINTR)
                ;
            net->link_pid[i] = 0;
        }
    int64_t until = now_ms() + 10000;
    while (net->init > 0 && !exited(net->init) && now_ms() < until)
        usleep(5000);
    net->keeper = 0;
    net->init = 0;
}

static void ns_path(const mh_net *net, int host, char *out, size_t len)
{
    /* ip's name for it exists in the keeper's mount namespace only */
    snprintf(out, len, "/proc/%d/root/run/netns/%s", (int)net->init, net->ns[host]);
}

int mh_netns_fd(const mh_net *net, int host)
{
    char path[256];
    ns_path(net, host, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

unsigned long mh_netns_inode(const mh_net *net, int host)
{
    char path[256];
    struct stat st;
    ns_path(net, host, path, sizeof path);
    return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* Whether the link at dir/name reads `want`. */
static bool link_is(const char *dir, const char *name, const char *want)
{
    char path[512], got[64];
    snprintf(path, sizeof path, "%.300s/%.64s", dir, name);
    ssize_t n = readlink(path, got, sizeof got - 1);
    if (n <= 0)
        return false;
    got[n] = '\0';
    return strcmp(got, want) == 0;
}

/* Whether any descriptor of the process at /proc/PID is the namespace. */
static bool fds_hold(const char *proc, const char *want)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/fd", proc);
    DIR *d = opendir(dir);
    bool held = false;
    for (struct dirent *e; d && !held && (e = readdir(d));)
        held = e->d_name[0] != '.' && link_is(dir, e->d_name, want);
    if (d)
        closedir(d);
    return held;
}

/* Whether the process at /proc/PID sees a mount of the namespace. */
static bool mounts_hold(const char *proc, const char *want)
{
    char path[300], line[1024];
    snprintf(path, sizeof path, "%s/mountinfo", proc);
    FILE *f = fopen(path, "re");
    bool held = false;
    while (f && !held && fgets(line, sizeof line, f))
        held = strstr(line, want) != NULL;
    if (f)
        fclose(f);
    return held;
}

bool mh_netns_held(unsigned long ino)
{
    char want[64];
    snprintf(want, sizeof want, "net:[%lu]", ino);
    DIR *d = opendir("/proc");
    bool held = false;
    for (struct dirent *e; d && !held && (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/%.32s", e->d_name);
        char ns[80];
        snprintf(ns, sizeof ns, "%s/ns", proc);
        held =
            link_is(ns, "net", want) || fds_hold(proc, want) || mounts_hold(proc, want);
    }
    if (d)
        closedir(d);
    return held;
}
