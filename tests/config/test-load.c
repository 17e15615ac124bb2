/* conf_defaults and conf_load: good files, and every kind of mistake named
 * by file and line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tconf.h"

/* After criterion.h (from tconf.h): it defines Test() for good only then. */
#include <criterion/parameterized.h>

static void expect_defaults(const conf_cluster *c)
{
    cr_expect_str_eq(c->listen, "127.0.0.1");
    cr_expect_eq(c->base_port, CONF_DEFAULT_BASE_PORT);
    cr_expect_null(c->token_file);
    cr_expect_eq(c->call_timeout_ms, 60000);
    cr_expect_eq(c->ping_timeout_ms, 1000);
    cr_expect_eq(c->heartbeat_ms, 1000);
    cr_expect_eq(c->start_timeout_ms, 10000);
    cr_expect_eq(c->shutdown_grace_ms, 5000);
    cr_expect_eq(c->threads, 0);
    cr_expect_eq(c->liveness_timeout_ms, 30000);
    cr_expect_eq(c->restart_backoff_ms, 1000);
    cr_expect_eq(c->restart_backoff_max_ms, 60000);
    cr_expect_eq(c->max_message_bytes, 1 << 30);
    cr_expect_eq(c->max_module_bytes, 256 << 20);
    cr_expect_eq(c->log_max_bytes, 10 << 20);
    cr_expect_eq(c->log_keep, 3);
    cr_expect_eq(c->wedge_grace_ms, 60000);
    cr_expect_eq(c->n_workers, 0);
    cr_expect_null(c->workers);
    cr_expect_eq(c->supervisor_pid, 0);
}

T_TEST(conf_load, defaults_are_the_documented_values)
{
    conf_cluster c;
    memset(&c, 0x5a, sizeof c);
    conf_defaults(&c);
    expect_defaults(&c);
    conf_fini(&c);
    cr_expect_null(c.listen, "conf_fini zeroes the struct");
    conf_fini(&c); /* twice is harmless */
}

T_TEST(conf_load, a_full_file_sets_every_field)
{
    const char *path = t_write("cluster.ini",
                               "; a cluster of three\n"
                               "# with both comment styles\n"
                               "[cluster]\n"
                               "listen = 0.0.0.0\n"
                               "  base_port = 7200      ; indented: still a key\n"
                               "token_file = /etc/ferry/token\n"
                               "call_timeout_ms = 30000\n"
                               "ping_timeout_ms: 250\n"
                               "heartbeat_ms = 0\n"
                               "start_timeout_ms = 20000\n"
                               "shutdown_grace_ms = 0\n"
                               "threads = 8\n"
                               "liveness_timeout_ms = 2000\n"
                               "restart_backoff_ms = 250\n"
                               "restart_backoff_max_ms = 4000\n"
                               "max_message_bytes = 1048576\n"
                               "max_module_bytes = 65536\n"
                               "log_max_bytes = 4096\n"
                               "log_keep = 0\n"
                               "wedge_grace_ms = 1500\n"
                               "\n"
                               "[workers]\n"
                               "worker = 127.0.0.1:7200\n"
                               "worker = [::1]:7201\n"
                               "worker = gpu-host-2:7100\n"
                               "\n"
                               "[state]\n"
                               "supervisor_pid = 4242\n",
                               0644);
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    conf_defaults(&c);
    cr_assert_eq(conf_load(&c, path, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(c.listen, "0.0.0.0");
    cr_expect_eq(c.base_port, 7200);
    cr_expect_str_eq(c.token_file, "/etc/ferry/token");
    cr_expect_eq(c.call_timeout_ms, 30000);
    cr_expect_eq(c.ping_timeout_ms, 250);
    cr_expect_eq(c.heartbeat_ms, 0);
    cr_expect_eq(c.start_timeout_ms, 20000);
    cr_expect_eq(c.shutdown_grace_ms, 0);
    cr_expect_eq(c.threads, 8);
    cr_expect_eq(c.liveness_timeout_ms, 2000);
    cr_expect_eq(c.restart_backoff_ms, 250);
    cr_expect_eq(c.restart_backoff_max_ms, 4000);
    cr_expect_eq(c.max_message_bytes, 1048576);
    cr_expect_eq(c.max_module_bytes, 65536);
    cr_expect_eq(c.log_max_bytes, 4096);
    cr_expect_eq(c.log_keep, 0);
    cr_expect_eq(c.wedge_grace_ms, 1500);
    cr_expect_eq(c.supervisor_pid, 4242);
    cr_assert_eq(c.n_workers, 3);
    cr_expect_str_eq(c.workers[0].address, "127.0.0.1:7200");
    cr_expect_str_eq(c.workers[0].host, "127.0.0.1");
    cr_expect_eq(c.workers[0].port, 7200);
    cr_expect(c.workers[0].local);
    cr_expect_str_eq(c.workers[1].address, "[::1]:7201");
    cr_expect_str_eq(c.workers[1].host, "::1");
    cr_expect_eq(c.workers[1].port, 7201);
    cr_expect(c.workers[1].local);
    cr_expect_str_eq(c.workers[2].host, "gpu-host-2");
    cr_expect_eq(c.workers[2].port, 7100);
    cr_expect_not(c.workers[2].local);
    conf_fini(&c);
}

T_TEST(conf_load, keys_absent_from_the_file_keep_the_callers_values)
{
    const char *path = t_write("c.ini", "[cluster]\nthreads = 3\n", 0644);
    conf_cluster c;
    conf_defaults(&c);
    c.call_timeout_ms = 1234;
    cr_assert_eq(conf_load(&c, path, NULL, 0), 0);
    cr_expect_eq(c.threads, 3);
    cr_expect_eq(c.call_timeout_ms, 1234);
    cr_expect_str_eq(c.listen, "127.0.0.1");
    conf_fini(&c);
}

T_TEST(conf_load, a_files_workers_replace_the_callers)
{
    const char *path = t_write("c.ini", "[workers]\nworker = 127.0.0.1:9000\n", 0644);
    conf_cluster c;
    conf_defaults(&c);
    cr_assert_eq(conf_add_worker(&c, "127.0.0.1:8000", NULL, 0), 0);
    cr_assert_eq(conf_add_worker(&c, "127.0.0.1:8001", NULL, 0), 0);
    cr_assert_eq(conf_load(&c, path, NULL, 0), 0);
    cr_assert_eq(c.n_workers, 1);
    cr_expect_str_eq(c.workers[0].address, "127.0.0.1:9000");
    conf_fini(&c);
}

T_TEST(conf_load, a_file_without_workers_keeps_the_callers)
{
    const char *path = t_write("c.ini", "[cluster]\nthreads = 1\n[workers]\n", 0644);
    conf_cluster c;
    conf_defaults(&c);
    cr_assert_eq(conf_add_worker(&c, "127.0.0.1:8000", NULL, 0), 0);
    cr_assert_eq(conf_load(&c, path, NULL, 0), 0);
    cr_assert_eq(c.n_workers, 1);
    cr_expect_str_eq(c.workers[0].address, "127.0.0.1:8000");
    conf_fini(&c);
}

T_TEST(conf_load, a_relative_token_file_lies_beside_the_cluster_file)
{
    char dir[512], expect[600], cwd[4096];
    t_path(dir, sizeof dir, "etc");
    cr_assert_eq(conf_mkdirs(dir, 0700), 0);
    const char *path =
        t_write("etc/c.ini", "[cluster]\ntoken_file = secret/token\n", 0644);
    snprintf(expect, sizeof expect, "%s/secret/token", dir);
    conf_cluster c;
    conf_defaults(&c);
    cr_assert_eq(conf_load(&c, path, NULL, 0), 0);
    cr_expect_str_eq(c.token_file, expect);
    conf_fini(&c);

    /* Named relative to the current directory, the result is the same. */
    cr_assert(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(T_DIR), 0);
    conf_defaults(&c);
    cr_assert_eq(conf_load(&c, "etc/c.ini", NULL, 0), 0);
    cr_expect_str_eq(c.token_file, expect);
    conf_fini(&c);
    cr_assert_eq(chdir(dir), 0);
    conf_defaults(&c);
    cr_assert_eq(conf_load(&c, "c.ini", NULL, 0), 0);
    cr_expect_str_eq(c.token_file, expect);
    conf_fini(&c);
    cr_assert_eq(chdir(cwd), 0);
}

T_TEST(conf_load, a_byte_order_mark_and_crlf_line_ends_are_accepted)
{
    const char *path =
        t_write("c.ini", "\xEF\xBB\xBF[cluster]\r\nthreads = 2\r\n[workers]\r\n", 0644);
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    conf_defaults(&c);
    cr_assert_eq(conf_load(&c, path, err, sizeof err), 0, "%s", err);
    cr_expect_eq(c.threads, 2);
    conf_fini(&c);
}

T_TEST(conf_load, a_missing_file_is_enoent_with_its_name)
{
    char path[512], expect[600];
    t_path(path, sizeof path, "nope.ini");
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    conf_defaults(&c);
    cr_expect_eq(conf_load(&c, path, err, sizeof err), FERRY_ENOENT);
    snprintf(expect, sizeof expect, "%s: No such file or directory", path);
    cr_expect_str_eq(err, expect);
    expect_defaults(&c);
    conf_fini(&c);
}

/* ---- mistakes ------------------------------------------------------------ */

/* Fixed arrays, not pointers: Criterion may run a parameter in a freshly
 * started copy of this program. */
typedef struct mistake {
    char name[48];
    char text[320];
    int line;
    char msg[400];
} mistake;

ParameterizedTestParameters(conf_load, every_mistake_names_its_file_and_line)
{
    static mistake cases[] = {
        {"number", "[cluster]\nlisten = 127.0.0.1\ncall_timeout_ms = abc\n", 3,
         "call_timeout_ms: expected a whole number of milliseconds >= 1, got 'abc'"},
        {"zero timeout", "[cluster]\nping_timeout_ms = 0\n", 2,
         "ping_timeout_ms: expected a whole number of milliseconds >= 1, got '0'"},
        {"negative", "[cluster]\nheartbeat_ms = -5\n", 2,
         "heartbeat_ms: expected a whole number of milliseconds >= 0, got '-5'"},
        {"unit", "[cluster]\nstart_timeout_ms = 10s\n", 2,
         "start_timeout_ms: expected a whole number of milliseconds >= 1, got '10s'"},
        {"too big", "[cluster]\nshutdown_grace_ms = 99999999999999999999\n", 2,
         "shutdown_grace_ms: expected a whole number of milliseconds <= 2147483647, got "
         "'99999999999999999999'"},
        {"empty number", "[cluster]\ncall_timeout_ms =\n", 2,
         "call_timeout_ms: expected a whole number of milliseconds >= 1, got ''"},
        {"port", "[cluster]\nbase_port = 70000\n", 2,
         "base_port: expected a port number from 0 to 65535, got '70000'"},
        {"threads", "[cluster]\nthreads = 1.5\n", 2,
         "threads: expected a number of threads from 0 to 1024, got '1.5'"},
        {"pid", "[state]\nsupervisor_pid = x\n", 2,
         "supervisor_pid: expected a process id >= 1, got 'x'"},
        {"listen", "[cluster]\nlisten = not a host\n", 2,
         "listen: expected a host name or address, got 'not a host'"},
        {"token file", "[cluster]\ntoken_file =\n", 2,
         "token_file: expected a file name, got ''"},
        {"unknown key", "[cluster]\nlisten = ::1\ntokn_file = /x\n", 3,
         "unknown key 'tokn_file' in [cluster] (known: listen, base_port, token_file, "
         "call_timeout_ms, ping_timeout_ms, heartbeat_ms, start_timeout_ms, "
         "shutdown_grace_ms, threads, liveness_timeout_ms, restart_backoff_ms, "
         "restart_backoff_max_ms, max_message_bytes, max_module_bytes, log_max_bytes, "
         "log_keep, wedge_grace_ms, metrics_port, stall_warn_ms, stall_abort_ms, tls_cert, tls_key, tls_ca, insecure)"},
        {"message limit too small", "[cluster]\nmax_message_bytes = 1000\n", 2,
         "max_message_bytes: expected a number of bytes from 65536 to 2146435072, got "
         "'1000'"},
        {"module limit too big", "[cluster]\nmax_module_bytes = 4294967296\n", 2,
         "max_module_bytes: expected a number of bytes from 4096 to 2146435072, got "
         "'4294967296'"},
        {"negative liveness", "[cluster]\nliveness_timeout_ms = -1\n", 2,
         "liveness_timeout_ms: expected a whole number of milliseconds >= 0, got '-1'"},
        {"log keep", "[cluster]\nlog_keep = 1000\n", 2,
         "log_keep: expected a number of old logs from 0 to 100, got '1000'"},
        {"wedge grace over a day", "[cluster]\nwedge_grace_ms = 86400001\n", 2,
         "wedge_grace_ms: expected a whole number of milliseconds up to a day from 0 to "
         "86400000, got '86400001'"},
        {"unknown key in workers", "[workers]\nworkers = 127.0.0.1:1\n", 2,
         "unknown key 'workers' in [workers] (known: worker, attach)"},
        {"unknown key in state", "[state]\npid = 1\n", 2,
         "unknown key 'pid' in [state] (known: supervisor_pid)"},
        {"key outside a section", "; hello\nthreads = 1\n", 2,
         "key 'threads' before any section (expected [cluster], [workers] or [state] "
         "first)"},
        {"unknown section", "[cluster]\nthreads = 1\n\n[wrokers]\n", 4,
         "unknown section [wrokers] (known: [cluster], [workers], [state])"},
        {"unclosed section", "[cluster]\n[workers\n", 2,
         "expected ']' to close the section name, got '[workers'"},
        {"text after section", "[cluster] threads = 1\n", 1,
         "unexpected text after the section name, got '[cluster] threads = 1'"},
        {"not key = value", "[cluster]\nthreads = 1\nbase_port 7100\n", 3,
         "expected 'key = value', '[section]' or a comment, got 'base_port 7100'"},
        {"bad last line without newline", "[cluster]\nthreads = 1\noops", 3,
         "expected 'key = value', '[section]' or a comment, got 'oops'"},
        {"duplicate key", "[cluster]\nthreads = 1\n\nthreads = 2\n", 4,
         "duplicate key 'threads' in [cluster] (first set on line 2)"},
        {"worker without port", "[workers]\nworker = 127.0.0.1:7100\nworker = 10.0.0.1\n",
         3, "worker: expected host:port, got '10.0.0.1'"},
        {"worker port 0", "[workers]\nworker = 127.0.0.1:0\n", 2,
         "worker: expected host:port with a port from 1 to 65535, got '127.0.0.1:0'"},
        {"worker bare IPv6", "[workers]\nworker = ::1:7100\n", 2,
         "worker: expected host:port with an IPv6 host in brackets ([::1]:7100), got "
         "'::1:7100'"},
        {"worker bad host", "[workers]\nworker = a b:7100\n", 2,
         "worker: expected host:port with a host name or address, got 'a b:7100'"},
        {"duplicate worker",
         "[workers]\nworker = 127.0.0.1:7100\nworker = 127.0.0.1:7101\n"
         "worker = 127.0.0.1:7100\n",
         4,
         "duplicate worker '127.0.0.1:7100' (already listed on line 2 as "
         "'127.0.0.1:7100')"},
        {"duplicate worker, other case", "[workers]\nworker = Host:1\nworker = host:1\n",
         3, "duplicate worker 'host:1' (already listed on line 2 as 'Host:1')"},
        {"first of two mistakes", "[cluster]\nthreads = x\nbogus\n", 2,
         "threads: expected a number of threads from 0 to 1024, got 'x'"},
        {"syntax before a bad value", "[cluster]\nbogus\nthreads = x\n", 2,
         "expected 'key = value', '[section]' or a comment, got 'bogus'"},
    };
    return cr_make_param_array(mistake, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(mistake *m, conf_load, every_mistake_names_its_file_and_line,
                  .init = t_setup, .fini = t_teardown)
{
    const char *path = t_write("cluster.ini", m->text, 0644);
    char expect[CONF_ERR_LEN + 600];
    char err[CONF_ERR_LEN] = "";
    conf_cluster c;
    conf_defaults(&c);
    int rc = conf_load(&c, path, err, sizeof err);
    cr_expect_eq(rc, FERRY_EINVAL, "%s: rc %d", m->name, rc);
    snprintf(expect, sizeof expect, "%s:%d: %s", path, m->line, m->msg);
    cr_expect_str_eq(err, expect, "%s", m->name);
    expect_defaults(&c); /* a failed load changes nothing */
    conf_fini(&c);
    t_finish();
}

T_TEST(conf_load, a_line_longer_than_inih_reads_is_a_mistake_on_that_line)
{
    char text[600], expect[CONF_ERR_LEN + 600], err[CONF_ERR_LEN] = "";
    char longpath[301];
    memset(longpath, 'a', 300);
    longpath[0] = '/';
    longpath[300] = '\0';
    snprintf(text, sizeof text, "[cluster]\nthreads = 1\ntoken_file = %s\nthreads = 2\n",
             longpath);
    const char *path = t_write("c.ini", text, 0644);
    conf_cluster c;
    conf_defaults(&c);
    cr_expect_eq(conf_load(&c, path, err, sizeof err), FERRY_EINVAL);
    snprintf(expect, sizeof expect, "%s:3: line is longer than 199 characters", path);
    cr_expect_str_eq(err, expect);
    expect_defaults(&c);
    conf_fini(&c);
}

T_TEST(conf_load, a_line_of_exactly_199_characters_is_read_whole)
{
    char text[400], value[200], err[CONF_ERR_LEN] = "";
    /* "token_file = " is 13 characters. */
    memset(value, 'b', 186);
    value[0] = '/';
    value[186] = '\0';
    snprintf(text, sizeof text, "[cluster]\ntoken_file = %s\nthreads = 3\n", value);
    const char *path = t_write("c.ini", text, 0644);
    conf_cluster c;
    conf_defaults(&c);
    cr_assert_eq(conf_load(&c, path, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(c.token_file, value);
    cr_expect_eq(c.threads, 3);
    conf_fini(&c);
}

T_TEST(conf_load, a_short_error_buffer_gets_a_truncated_message)
{
    const char *path = t_write("c.ini", "[cluster]\nthreads = x\n", 0644);
    char err[8];
    conf_cluster c;
    conf_defaults(&c);
    cr_expect_eq(conf_load(&c, path, err, sizeof err), FERRY_EINVAL);
    cr_expect_eq(strlen(err), sizeof err - 1);
    cr_expect_eq(strncmp(err, path, sizeof err - 1), 0);
    conf_fini(&c);
}

T_TEST(conf_load, attach_lists_a_worker_that_is_waited_for_not_started)
{
    const char *path = t_write("cluster.ini",
                               "[workers]\n"
                               "worker = 127.0.0.1:7300\n"
                               "attach = 127.0.0.1:7301\n"
                               "worker = 10.9.8.7:7300\n",
                               0600);
    conf_cluster c;
    conf_defaults(&c);
    char err[CONF_ERR_LEN] = "";
    cr_assert_eq(conf_load(&c, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c.n_workers, 3);
    cr_expect(c.workers[0].local && !c.workers[0].attach);
    cr_expect(c.workers[1].local && c.workers[1].attach,
              "rank 1 keeps its rank and is attached");
    cr_expect(!c.workers[2].local && !c.workers[2].attach);

    /* cluster.ini round-trips it. */
    char saved[512];
    t_path(saved, sizeof saved, "saved.ini");
    cr_assert_eq(conf_save(&c, saved), 0);
    conf_cluster back;
    conf_defaults(&back);
    cr_assert_eq(conf_load(&back, saved, err, sizeof err), 0, "%s", err);
    cr_expect(back.workers[1].attach && !back.workers[0].attach &&
              !back.workers[2].attach);
    conf_fini(&back);
    conf_fini(&c);

    path = t_write("dup.ini",
                   "[workers]\nworker = 127.0.0.1:7300\nattach = 127.0.0.1:7300\n", 0600);
    conf_defaults(&c);
    cr_expect_neq(conf_load(&c, path, err, sizeof err), 0);
    cr_expect(strstr(err, "dup.ini:3: duplicate worker"), "%s", err);
    conf_fini(&c);
}
