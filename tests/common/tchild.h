/* tests/common — a child process that a test kills: forked before the test
 * starts gRPC, never outliving the test, SIGKILLed on a timer from another
 * thread while the test blocks in a call, and reaped at the end. */
#ifndef FERRY_TESTS_COMMON_TCHILD_H
#define FERRY_TESTS_COMMON_TCHILD_H

#include <pthread.h>
#include <sys/types.h>

/* fork(), with the child set to die with the test process. */
pid_t tcom_fork(void);

/* SIGKILLs `pid` ms milliseconds from now, from a thread that *th joins. */
void tcom_kill_after(pid_t pid, int ms, pthread_t *th);

/* SIGKILLs *pid if it is > 0, waits for it and sets it to 0. */
void tcom_reap(pid_t *pid);

#endif
