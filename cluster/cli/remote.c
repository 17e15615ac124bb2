/* `--rendezvous HOST:PORT`: `submit`, `status`, `predict` and `shutdown` on
 * workers an engine started (srun, mpirun, a Kubernetes Indexed Job), found
 * through rank 0's rendezvous instead of $FERRY_HOME's cluster state, so
 * that a driver pod or a login node needs no disk shared with them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* How long a command waits for rank 0 to answer and every rank to join:
 * an engine starts a world's tasks within minutes of each other. */
#define REMOTE_WAIT_MS  (5 * 60 * 1000)
#define REMOTE_RETRY_MS 500

static const char *rendezvous, *token_file;
static const char *tls[3]; /* --tls-cert, --tls-key, --tls-ca */

/* Takes `--NAME VALUE` or `--NAME=VALUE` at argv[*i] into *out. Returns 1
 * when taken (and how many arguments it spans in *span), 0 when argv[*i] is
 * another option, -1 when the value is missing. */
static int take_one(char **argv, int argc, int i, const char *name, const char **out,
                    int *span)
{
    size_t n = strlen(name);
    if (strncmp(argv[i], name, n) != 0)
        return 0;
    if (argv[i][n] == '=') {
        *out = argv[i] + n + 1;
        *span = 1;
        return 1;
    }
    if (argv[i][n] != '\0')
        return 0;
    if (i + 1 >= argc)
        return -1;
    *out = argv[i + 1];
    *span = 2;
    return 1;
}

int cli_remote_take(int *argc, char **argv, const char *cmd)
{
    static const struct {
        const char *name;
        const char **out;
    } opts[] = {{"--rendezvous", &rendezvous}, {"--token-file", &token_file},
                {"--tls-cert", &tls[0]},       {"--tls-key", &tls[1]},
                {"--tls-ca", &tls[2]}};
    int n = *argc;
    for (int i = 1; i < n && strcmp(argv[i], "--") != 0;) {
        int span = 0, got = 0;
        for (size_t k = 0; !got && k < sizeof opts / sizeof opts[0]; k++) {
            if ((got = take_one(argv, n, i, opts[k].name, opts[k].out, &span)) < 0) {
                cli_err(cmd, "%s needs a value", opts[k].name);
                return CLI_USAGE;
            }
        }
        if (!got) {
            i++;
            continue;
        }
        memmove(argv + i, argv + i + span, (size_t)(n - i - span + 1) * sizeof *argv);
        n -= span;
    }
    *argc = n;
    if ((token_file || tls[0] || tls[1] || tls[2]) && !rendezvous) {
        cli_err(cmd, "--token-file and --tls-* go with --rendezvous (a cluster of this "
                     "FERRY_HOME keeps its own)");
        return CLI_USAGE;
    }
    return CLI_OK;
}

bool cli_remote_given(void)
{
    return rendezvous != NULL;
}

const char *cli_remote_address(void)
{
    return rendezvous;
}

static void nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* The ranks not in `rep` yet, as "1, 3". */
static void missing_ranks(const proto_rendezvous_reply *rep, char *buf, size_t len,
                          int *n)
{
    size_t at = 0;
    *n = 0;
    buf[0] = '\0';
    for (size_t i = 1; i < rep->n_addresses && at < len; i++) {
        if (rep->addresses[i][0])
            continue;
        int w = snprintf(buf + at, len - at, "%s%zu", *n ? ", " : "", i);
        at += w > 0 ? (size_t)w : 0;
        ++*n;
    }
}

/* Asks rank 0 until every rank has joined; *out its last answer. Says once
 * what it waits for. */
static int await_world(cluster *rank0, const char *cmd, proto_rendezvous_reply **out)
{
    bool said_rank0 = false, said_ranks = false;
    for (int waited = 0;; waited += REMOTE_RETRY_MS) {
        int rc = cluster_rendezvous_ask(rank0, out), missing = 0;
        char list[512];
        if (rc == 0 && (missing_ranks(*out, list, sizeof list, &missing), missing == 0))
            return 0;
        /* Not listening yet, or not resolvable yet (a pod not yet made),
         * is waited for; a worker that answered in another tongue (TLS,
         * or a certificate refused: rpc's explanation names it) is not. */
        const char *text = cluster_error(rank0);
        bool tongue = text && (strstr(text, "TLS") || strstr(text, "certificate"));
        bool absent = !tongue && (rc == FERRY_EUNAVAIL || rc == FERRY_ETIMEDOUT ||
                                  rc == FERRY_ECONNREFUSED || rc == FERRY_ECONNRESET);
        if (rc && !absent) {
            cli_err(cmd, "the rendezvous at %s: %s", rendezvous, cluster_error(rank0));
            return rc;
        }
        if (waited >= REMOTE_WAIT_MS) {
            if (rc)
                cli_err(cmd, "rank 0 at %s did not answer in %d s: %s", rendezvous,
                        REMOTE_WAIT_MS / 1000, cluster_error(rank0));
            else
                cli_err(cmd, "ranks %s never joined the rendezvous at %s in %d s", list,
                        rendezvous, REMOTE_WAIT_MS / 1000);
            proto_free(*out);
            *out = NULL;
            return FERRY_ETIMEDOUT;
        }
        if (rc && !said_rank0) {
            fprintf(stderr, "ferry %s: waiting for rank 0 at %s\n", cmd, rendezvous);
            said_rank0 = true;
        } else if (!rc && !said_ranks) {
            fprintf(stderr,
                    "ferry %s: waiting for rank%s %s of %zu to join the rendezvous\n",
                    cmd, missing > 1 ? "s" : "", list, (*out)->n_addresses);
            said_ranks = true;
        }
        proto_free(*out);
        *out = NULL;
        nap_ms(REMOTE_RETRY_MS);
    }
}

/* r->conf lists the world's workers: rank 0 where the command reached it,
 * the others where rank 0 saw them join. */
static int list_world(cli_running *r, const proto_rendezvous_reply *rep, const char *cmd)
{
    char err[CONF_ERR_LEN];
    for (size_t i = 0; i < rep->n_addresses; i++) {
        const char *addr = i == 0 ? rendezvous : rep->addresses[i];
        if (conf_add_worker(&r->conf, addr, err, sizeof err)) {
            cli_err(cmd, "rank %zu joined as '%s': %s", i, addr, err);
            return FERRY_EINVAL;
        }
    }
    return 0;
}

/* The TLS files given on the command line, for conf's connections. */
static int use_tls(conf_cluster *conf)
{
    char **to[] = {&conf->tls_cert, &conf->tls_key, &conf->tls_ca};
    for (int i = 0; i < 3; i++)
        if (tls[i] && !(*to[i] = strdup(tls[i])))
            return FERRY_ENOMEM;
    return 0;
}

int cli_remote_open(cli_running *r, const home_paths *h, const char *cmd)
{
    memset(r, 0, sizeof *r);
    conf_defaults(&r->conf);
    conf_cluster one;
    conf_defaults(&one);
    int trc = use_tls(&r->conf);
    if (trc == 0)
        trc = use_tls(&one);
    char err[CONF_ERR_LEN] = "";
    const char *tf = token_file ? token_file : h->token;
    cluster *rank0 = NULL;
    proto_rendezvous_reply *rep = NULL;
    int rc = trc;
    if (rc) {
        cli_err(cmd, "out of memory");
        goto done;
    }
    if ((rc = conf_token_read(tf, r->token, sizeof r->token, err, sizeof err))) {
        cli_err(cmd, "cannot read the cluster token %s: %s (--token-file names it)", tf,
                err[0] ? err : ferry_strerror(rc));
        goto done;
    }
    if ((rc = conf_add_worker(&one, rendezvous, err, sizeof err))) {
        cli_err(cmd, "--rendezvous: %s", err);
        goto done;
    }
    if ((rc = cli_cluster_connect(&one, r->token, false, &rank0))) {
        cli_err(cmd, "cannot reach %s: %s", rendezvous, ferry_strerror(rc));
        goto done;
    }
    if ((rc = await_world(rank0, cmd, &rep)) || (rc = list_world(r, rep, cmd)))
        goto done;
    if ((rc = cli_cluster_connect(&r->conf, r->token, true, &r->cl)))
        cli_err(cmd, "cannot connect to the cluster: %s", ferry_strerror(rc));
done:
    proto_free(rep);
    cluster_destroy(rank0);
    conf_fini(&one);
    if (rc) {
        conf_fini(&r->conf);
        memset(r->token, 0, sizeof r->token);
    }
    return rc;
}
