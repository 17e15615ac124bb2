/* runtime/worker_main — `ferry worker`, the worker's program: one worker
 * daemon in the foreground, on top of the runtime library (rt_worker).
 * The `ferry` executable and the tests link it; libferry does not.
 *
 * Exit status: 0 after Shutdown, SIGTERM or SIGINT; 1 when it cannot start
 * (no token, state directory); 2 for a usage mistake; 3 when the port is in
 * use, so that a launcher can tell that case apart without parsing text; 4
 * when its listener stopped accepting connections (gRPC 1.51 gives up for
 * good once file descriptors ran out), so that a supervisor restarts it; 5
 * when it is wedged: a call cancelled --wedge-grace-ms ago still holds its
 * executor slot (a function that ignores cancellation), so that a supervisor
 * restarts it; the crash record says which call. */
#ifndef FERRY_RUNTIME_WORKER_MAIN_H
#define FERRY_RUNTIME_WORKER_MAIN_H

/* `ferry worker --listen ADDR ...`: runs a worker in the foreground until
 * Shutdown, SIGTERM or SIGINT. Returns the process exit status. */
int rt_worker_main(int argc, char **argv);

#endif
