/* tests/e2e — what a running task can do to its worker (issue 11, findings
 * 8, 9 and 10): calls that ignore cancellation fill the executor (a later
 * call fails fast naming them, Ping and Stats show them, and past a grace
 * the worker exits to be restarted); a task that forks leaves nothing after
 * `ferry shutdown`; a training session belongs to the submitter that began
 * it. Modules are built here; nothing of the test outlives it (/proc). */
#include "e2e.h"
#include "e2e_plugin.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "ferry.pb-c.h"

TestSuite(e2e_worker, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

/* ---- finding 9: a task that forks ---------------------------------------- */

Test(e2e_worker, what_a_task_forks_is_gone_after_shutdown)
{
    e2e_start(2);
    char *so = e2e_build_module(
        "forker",
        "#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\n"
        "#include <ferry/task.h>\n"
        "static int spawn(ferry_ctx_t *c, const ferry_bytes_t *in, ferry_bytes_t *o)\n"
        "{ (void)in; pid_t pid = fork();\n"
        "  if (pid == 0) { setsid(); if (fork() == 0) for (;;) pause(); for (;;) pause(); }\n"
        "  char *b = c->ops->result(c, o, 32); snprintf(b, 32, \"%d\", (int)pid);\n"
        "  o->len = strlen(b); return 0; }\n"
        "static int drive(ferry_driver_t *d)\n"
        "{ ferry_bytes_t out[64] = {{0}}; int rc = d->ops->call_all(d, \"spawn\", NULL, out);\n"
        "  for (int r = 0; !rc && r < d->world_size; r++) {\n"
        "    d->ops->print(d, \"child %.*s\", (int)out[r].len, (char *)out[r].data);\n"
        "    d->ops->free_bytes(d, &out[r]); }\n"
        "  return rc; }\n"
        "FERRY_TASK(.name = \"forker\", .driver = drive,\n"
        "           .functions = FERRY_FUNCTIONS({\"spawn\", spawn}));\n");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", so, NULL);
    E2E_EXPECT(&r, 0);
    free(so);
    pid_t kids[2] = {0, 0};
    const char *p = r.out;
    for (int i = 0; i < 2; i++) {
        p = strstr(p, "child ");
        cr_assert(p, "no child pid printed:\n%s", r.out);
        kids[i] = (pid_t)atoi(p + 6);
        p += 6;
        cr_assert(kids[i] > 0 && e2e_proc_alive(kids[i]), "child %d is not running",
                  (int)kids[i]);
    }
    e2e_run_fini(&r);
    e2e_shutdown_leaves_nothing();
    for (int i = 0; i < 2; i++)
        cr_assert(!e2e_proc_alive(kids[i]), "child %d survived", (int)kids[i]);
}
