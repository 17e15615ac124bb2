/* The driver a task runs on the master: every member of its ops table. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static int driver_ran;

static int test_driver(ferry_driver_t *drv)
{
    const ferry_driver_ops_t *ops = drv->ops;
    cr_assert_eq(drv->version, FERRY_TASK_ABI_VERSION);
    cr_assert_eq(ops->size, sizeof(ferry_driver_ops_t));
    cr_assert_eq(drv->world_size, 2);
    cr_assert_eq(drv->argc, 2);
    cr_assert_str_eq(drv->argv[1], "--flag");
    cr_assert(drv->json);

    ferry_bytes_t out[2];
    cr_assert(ops->call_all(drv, "info", NULL, out) == 0, "%s", ops->error(drv));
    tc_assert_bytes(&out[1], "rank 1 of 2 task faulty function info");
    ops->free_bytes(drv, &out[0]);
    ops->free_bytes(drv, &out[1]);

    ferry_bytes_t in = tc_str("via the driver"), one;
    cr_assert(ops->call(drv, 1, "echo", &in, &one) == 0, "%s", ops->error(drv));
    tc_assert_bytes(&one, "via the driver");
    ops->free_bytes(drv, &one);

    ferry_bytes_t many_in[20], many_out[20];
    for (int i = 0; i < 20; i++)
        many_in[i] = tc_str(i % 2 ? "odd" : "even");
    cr_assert(ops->call_any(drv, "echo", 20, many_in, many_out) == 0, "%s",
              ops->error(drv));
    for (int i = 0; i < 20; i++) {
        tc_assert_bytes(&many_out[i], i % 2 ? "odd" : "even");
        ops->free_bytes(drv, &many_out[i]);
    }
    cr_assert(ops->barrier(drv) == 0, "%s", ops->error(drv));

    ferry_worker_info_t info;
    cr_assert(ops->worker(drv, 1, &info) == 0);
    cr_assert_eq(info.rank, 1);
    cr_assert_str_eq(info.address, T.target[1]);
    cr_assert_eq(info.pid, getpid());
    cr_assert(strncmp(info.device, "cpu", 3) == 0, "device '%s'", info.device);
    cr_assert_eq(ops->worker(drv, 2, &info), FERRY_EINVAL);

    in = tc_str("from the driver");
    cr_assert_eq(ops->call(drv, 0, "fail", &in, &one), FERRY_EINVAL);
    cr_assert(strstr(ops->error(drv), "function fail") &&
                  strstr(ops->error(drv), "bad input: from the driver"),
              "%s", ops->error(drv));

    /* print() writes a whole line on stdout (here a file: TAP owns stdout). */
    char path[400], line[128] = "";
    snprintf(path, sizeof path, "%s/stdout", T.dir);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    ops->print(drv, "a line for the user: %d", 42);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t got = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[got] = '\0';
    cr_assert_str_eq(line, "a line for the user: 42\n");
    ops->log(drv, FERRY_LOG_INFO, "a line for the log: %s", "ok");
    driver_ran++;
    return 7;
}

TC_TEST(cluster_driver, every_op_reaches_the_cluster)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    ferry_task_t task = {.version = FERRY_TASK_ABI_VERSION,
                         .size = sizeof task,
                         .name = "test",
                         .driver = test_driver};
    char *argv[] = {"faulty.so", "--flag", NULL};
    driver_ran = 0;
    int rc = cluster_run_driver(T.cl, &T.mod, &task, 2, argv, true);
    cr_assert_eq(driver_ran, 1);
    cr_assert_eq(rc, 7, "the driver's result is returned");
}

TC_TEST(cluster_driver, a_module_without_driver_lists_what_it_exports)
{
    tc_workers(1);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    ferry_task_t task = {
        .version = FERRY_TASK_ABI_VERSION, .size = sizeof task, .name = "x"};
    char *argv[] = {"faulty.so", NULL};
    int rc = cluster_run_driver(T.cl, &T.mod, &task, 1, argv, false);
    cr_assert_eq(rc, FERRY_EINVAL);
    cr_assert(strstr(cluster_error(T.cl), "no driver") &&
                  strstr(cluster_error(T.cl), "echo"),
              "%s", cluster_error(T.cl));
}
