/* `ferry worker`'s command line. */
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>

#include <ferry/ferry.h>

#include "config/config.h"
#include "runtime/device/device.h"
#include "wm_int.h"

static const char usage[] =
    "usage: ferry worker --listen ADDR [options]\n"
    "       ferry worker --from-env --listen ADDR [options]\n"
    "       ferry worker --from-env --print\n"
    "\n"
    "Runs one worker daemon in the foreground until a Shutdown call, SIGTERM\n"
    "or SIGINT. It serves Ping to anyone and every other call only with the\n"
    "cluster token.\n"
    "\n"
    "options:\n"
    "  -l, --listen ADDR      address to listen on: 127.0.0.1:7100, [::1]:7100;\n"
    "                         port 0 picks a free one (see --port-file)\n"
    "  -s, --state-dir DIR    private state: module cache, crash record\n"
    "                         (default: $FERRY_HOME/workers/PORT)\n"
    "  -k, --token-file FILE  the cluster token, mode 0600 (default: $FERRY_HOME/token)\n"
    "  -r, --rank N           this worker's rank in the cluster (default: -1, none)\n"
    "      --from-env         take the rank from the launcher that started this\n"
    "                         worker (see below) and say which in the first line\n"
    "      --print            with --from-env: print what the launcher says (rank,\n"
    "                         world size, rank 0's address) as JSON, and exit\n"
    "  -t, --threads N        executor threads (default 0: two per core, at least 4)\n"
    "  -d, --device DEV       cpu, cuda, cuda:N or auto (default: auto: the first\n"
    "                         GPU when one is visible, else the cpu)\n"
    "      --restarts N       how often a supervisor restarted this worker\n"
    "  -p, --port-file FILE   once listening, write the bound port to FILE\n"
    "      --wedge-grace-ms MS  a call still running this long after it was\n"
    "                         cancelled wedges the worker: it exits (status 5)\n"
    "                         to be restarted (default 60000; 0: never)\n"
    "      --parent-pid PID   exit (as on SIGTERM) when process PID, the parent\n"
    "                         that started this worker, is gone\n"
    "      --max-message-bytes N  largest payload of one call (default 1 GiB)\n"
    "      --max-module-bytes N   largest module LoadModule takes (default: the\n"
    "                         message limit)\n"
    "      --data-cache-bytes N  most bytes the data files shipped to it (ferry\n"
    "                         submit --ship-data) may take; the least recently\n"
    "                         used go first (default 10 GiB)\n"
    "      --cpus LIST        run on these CPUs only (taskset -c's form: 0-3,8);\n"
    "                         every thread the worker starts inherits it\n"
    "      --metrics ADDR     serve Prometheus metrics at http://ADDR/metrics\n"
    "                         (127.0.0.1:9100, [::1]:9100; port 0 picks one)\n"
    "      --tls-cert FILE    speak TLS on every connection, in and out, showing\n"
    "                         this certificate (PEM; with --tls-key)\n"
    "      --tls-key FILE     the certificate's private key (PEM)\n"
    "      --tls-ca FILE      the CA that signs the cluster's certificates: peers\n"
    "                         are checked against it, and clients must show a\n"
    "                         certificate it signed (mutual TLS)\n"
    "      --insecure         listen on an address other than loopback without\n"
    "                         TLS, and say nothing about it\n"
    "  -h, --help             this text\n"
    "  -V, --version          ferry's version\n"
    "\n"
    "Before a deliberate exit (Shutdown, SIGTERM, SIGINT) it writes the file\n"
    "`stopped` in its state directory: any other exit is a crash to a supervisor.\n"
    "\n"
    "Exit status: 0 after Shutdown or a signal, 1 when it cannot start,\n"
    "2 for a usage mistake, 3 when the port is in use, 4 when it stopped\n"
    "accepting connections (file descriptors ran out), 5 when a cancelled call\n"
    "never returned (see --wedge-grace-ms): restart it.\n"
    "\n"
    "Environment: FERRY_HOME (default ~/.ferry) holds the default state and token.\n"
    "With --from-env, the first launcher found of: FERRY_RANK (with FERRY_WORLD_SIZE\n"
    "and FERRY_RENDEZVOUS=HOST:PORT); torchrun or Kubeflow (RANK, WORLD_SIZE,\n"
    "MASTER_ADDR, MASTER_PORT; PET_NODE_RANK, PET_NNODES, ...); Open MPI\n"
    "(OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE); PMI (PMI_RANK, PMI_SIZE); an srun\n"
    "step (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST); a Kubernetes\n"
    "Indexed Job (JOB_COMPLETION_INDEX, with FERRY_WORLD_SIZE). Where the launcher\n"
    "does not say where rank 0 is, FERRY_RENDEZVOUS must. A missing variable, or two\n"
    "that disagree, stop the worker with a message that names them (status 1).\n";

int wm_usage_error(const char *fmt, const char *arg)
{
    fputs("ferry worker: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'ferry worker --help'.\n", stderr);
    return EXIT_USAGE;
}

static int check(const wm_options *o);

/* Returns -1 to go on, else the exit status. */
/* An option whose value is checked: -1 once taken, the exit status of a
 * bad value (said), or -2 for an option that is not one of these. */
static int take_value(int c, const char *arg, wm_options *o)
{
    long v;
    switch (c) {
    case 'r':
        if (!base_parse_long(arg, -1, INT_MAX, &v))
            return wm_usage_error("--rank: expected a number from -1 up, got '%s'", arg);
        o->rank = (int)v;
        return -1;
    case 't':
        if (!base_parse_long(arg, 0, 1024, &v))
            return wm_usage_error("--threads: expected a number from 0 to 1024, got '%s'",
                                  arg);
        o->threads = (int)v;
        return -1;
    case 'd':
        if (!rt_device_name_ok(arg))
            return wm_usage_error(
                "--device: expected cpu, cuda, cuda:N or auto, got '%s'", arg);
        o->device = arg;
        return -1;
    case 'R':
        if (!base_parse_long(arg, 0, UINT32_MAX, &v))
            return wm_usage_error("--restarts: expected a number from 0 up, got '%s'",
                                  arg);
        o->restarts = (uint32_t)v;
        return -1;
    case 'W':
        if (!base_parse_long(arg, 0, 24L * 3600 * 1000, &o->wedge_grace_ms))
            return wm_usage_error(
                "--wedge-grace-ms: expected a time from 0 to a day, got '%s'", arg);
        return -1;
    case 'P':
        if (!base_parse_long(arg, 1, INT32_MAX, &o->parent_pid))
            return wm_usage_error("--parent-pid: expected a process id, got '%s'", arg);
        return -1;
    case 'M':
        if (!base_parse_long(arg, CONF_MIN_BYTES_LIMIT, CONF_MAX_BYTES_LIMIT,
                             &o->max_message_bytes))
            return wm_usage_error(
                "--max-message-bytes: expected 65536 to 2146435072, got '%s'", arg);
        return -1;
    case 'O':
        if (!base_parse_long(arg, 4096, CONF_MAX_BYTES_LIMIT, &o->max_module_bytes))
            return wm_usage_error(
                "--max-module-bytes: expected 4096 to 2146435072, got '%s'", arg);
        return -1;
    case 'D':
        if (!base_parse_long(arg, 1 << 20, LONG_MAX, &v))
            return wm_usage_error(
                "--data-cache-bytes: expected a size from 1048576 bytes up, got '%s'",
                arg);
        o->data_cache_bytes = (uint64_t)v;
        return -1;
    case 'T': {
        char host[256];
        int port;
        if (conf_split_address(arg, host, sizeof host, &port) != 0)
            return wm_usage_error(
                "--metrics: expected an address such as 127.0.0.1:9100, got '%s'", arg);
        o->metrics = arg;
        return -1;
    }
    case 'C': {
        cpu_set_t set;
        if (conf_cpus_parse(arg, &set) != 0)
            return wm_usage_error("--cpus: expected a CPU list such as 0-3,8, got '%s'",
                                  arg);
        o->cpus = arg;
        return -1;
    }
    default:
        return -2;
    }
}

int wm_parse(int argc, char **argv, wm_options *o)
{
    static const struct option longs[] = {
        {"listen", required_argument, NULL, 'l'},
        {"state-dir", required_argument, NULL, 's'},
        {"token-file", required_argument, NULL, 'k'},
        {"rank", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'},
        {"device", required_argument, NULL, 'd'},
        {"restarts", required_argument, NULL, 'R'},
        {"port-file", required_argument, NULL, 'p'},
        {"wedge-grace-ms", required_argument, NULL, 'W'},
        {"parent-pid", required_argument, NULL, 'P'},
        {"max-message-bytes", required_argument, NULL, 'M'},
        {"max-module-bytes", required_argument, NULL, 'O'},
        {"cpus", required_argument, NULL, 'C'},
        {"data-cache-bytes", required_argument, NULL, 'D'},
        {"metrics", required_argument, NULL, 'T'},
        {"tls-cert", required_argument, NULL, 'B'},
        {"tls-key", required_argument, NULL, 'K'},
        {"tls-ca", required_argument, NULL, 'A'},
        {"insecure", no_argument, NULL, 'I'},
        {"from-env", no_argument, NULL, 'E'},
        {"print", no_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {0},
    };
    *o = (wm_options){.rank = -1, .wedge_grace_ms = WEDGE_GRACE_MS};
    optind = 0; /* GNU: start afresh, whatever parsed argv before */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":l:s:k:r:t:d:p:hV", longs, NULL)) != -1) {
        int taken = take_value(c, optarg, o);
        if (taken != -2) {
            if (taken != -1)
                return taken;
            continue;
        }
        switch (c) {
        case 'l':
            o->listen = optarg;
            break;
        case 's':
            o->state_dir = optarg;
            break;
        case 'k':
            o->token_file = optarg;
            break;
        case 'p':
            o->port_file = optarg;
            break;
        case 'B':
            o->tls.cert = optarg;
            break;
        case 'K':
            o->tls.key = optarg;
            break;
        case 'A':
            o->tls.ca = optarg;
            break;
        case 'I':
            o->insecure = true;
            break;
        case 'E':
            o->from_env = true;
            break;
        case 'J':
            o->print = true;
            break;
        case 'h':
            fputs(usage, stdout);
            return EXIT_OK;
        case 'V':
            printf("ferry %s\n", ferry_version());
            return EXIT_OK;
        case ':':
            return wm_usage_error("%s needs a value", argv[optind - 1]);
        default:
            return wm_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return wm_usage_error("unexpected argument '%s'", argv[optind]);
    return check(o);
}

/* The options that only make sense together, or apart. */
static int check(const wm_options *o)
{
    if (o->print && !o->from_env)
        return wm_usage_error("%s", "--print goes with --from-env");
    if (o->from_env && o->rank >= 0)
        return wm_usage_error("%s", "--rank and --from-env both give the rank: pass one");
    if (o->print)
        return -1;
    if (!o->listen)
        return wm_usage_error("%s", "--listen ADDR is required");
    if ((o->tls.ca || o->tls.key) && !o->tls.cert)
        return wm_usage_error("%s", "TLS needs the worker's certificate: pass --tls-cert "
                                    "and --tls-key");
    if (o->tls.cert && !o->tls.key)
        return wm_usage_error("%s", "--tls-cert needs --tls-key");
    if (o->tls.cert && o->insecure)
        return wm_usage_error("%s", "--insecure and --tls-cert contradict each other: "
                                    "pass one");
    return -1;
}
