/* The cluster lock across processes. Children report through their exit
 * status and pipes; the parent does every check. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tconf.h"

/* Runs fn(arg) in a child and returns its exit status (or 200 + signal). */
static int in_child(int (*fn)(const char *), const char *arg)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0)
        _exit(fn(arg));
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

static int take_status(const char *home)
{
    int fd = conf_lock_take(home);
    return fd >= 0 ? 0 : fd == FERRY_EBUSY ? 1 : 2;
}

/* A child that takes the lock, says so, and holds it until told to go. */
typedef struct holder {
    pid_t pid;
    int go; /* write end: closing it lets the child exit */
} holder;

static holder hold_in_child(const char *home)
{
    int ready[2], go[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
        int fd = conf_lock_take(home);
        char ok = fd >= 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(3);
        char c;
        while (read(go[0], &c, 1) > 0)
            ;
        _exit(fd >= 0 ? 0 : 1);
    }
    close(ready[1]);
    close(go[0]);
    char ok = 0;
    cr_assert_eq(read(ready[0], &ok, 1), 1);
    close(ready[0]);
    cr_assert_eq(ok, 'y', "the child could not take the lock");
    return (holder){pid, go[1]};
}

static void release(holder *h)
{
    int st;
    close(h->go);
    cr_assert_eq(waitpid(h->pid, &st, 0), h->pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

T_TEST(conf_lock, take_creates_home_and_holds_the_lock)
{
    char home[512], lock[600];
    t_path(home, sizeof home, "home/nested");
    cr_expect_not(conf_lock_held(home), "no lock file yet");
    int fd = conf_lock_take(home);
    cr_assert_geq(fd, 0, "%s", ferry_strerror(fd));
    snprintf(lock, sizeof lock, "%s/lock", home);
    cr_expect_eq(t_mode(lock), 0600);
    cr_expect_eq(t_mode(home), 0700);
    cr_expect(conf_lock_held(home));
    close(fd);
    cr_expect_not(conf_lock_held(home), "closing the fd releases it");
}

T_TEST(conf_lock, a_second_take_in_another_process_is_ebusy)
{
    int fd = conf_lock_take(T_DIR);
    cr_assert_geq(fd, 0);
    cr_expect_eq(in_child(take_status, T_DIR), 1, "EBUSY in the child");
    cr_expect_eq(conf_lock_take(T_DIR), FERRY_EBUSY,
                 "and in this process, on a new open");
    close(fd);
    cr_expect_eq(in_child(take_status, T_DIR), 0, "free again once closed");
}

T_TEST(conf_lock, held_while_a_child_holds_it_and_free_after_it_exits)
{
    holder h = hold_in_child(T_DIR);
    cr_expect(conf_lock_held(T_DIR));
    cr_expect_eq(conf_lock_take(T_DIR), FERRY_EBUSY);
    cr_expect(conf_lock_held(T_DIR), "probing does not release it");
    release(&h);
    cr_expect_not(conf_lock_held(T_DIR));
    int fd = conf_lock_take(T_DIR);
    cr_expect_geq(fd, 0);
    close(fd);
}

T_TEST(conf_lock, the_fd_is_inherited_so_a_forked_daemon_keeps_the_cluster_locked)
{
    int fd = conf_lock_take(T_DIR);
    cr_assert_geq(fd, 0);
    int flags = fcntl(fd, F_GETFD);
    cr_assert_geq(flags, 0);
    cr_expect_neq(flags & FD_CLOEXEC, 0,
                  "a program the daemon execs must not hold the lock");

    int go[2];
    cr_assert_eq(pipe(go), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* The "daemon": holds the inherited fd until told to go. */
        close(go[1]);
        char c;
        while (read(go[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(go[0]);
    close(fd); /* the command that started the daemon exits */
    cr_expect(conf_lock_held(T_DIR), "the daemon still holds it");
    cr_expect_eq(in_child(take_status, T_DIR), 1);
    close(go[1]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect_not(conf_lock_held(T_DIR), "released when the daemon exits");
}

T_TEST(conf_lock, two_homes_never_interfere)
{
    char a[512], b[512];
    t_path(a, sizeof a, "a");
    t_path(b, sizeof b, "b");
    int fa = conf_lock_take(a);
    cr_assert_geq(fa, 0);
    cr_expect_not(conf_lock_held(b));
    int fb = conf_lock_take(b);
    cr_expect_geq(fb, 0);
    close(fa);
    close(fb);
}
