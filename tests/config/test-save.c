/* conf_save: what it writes loads back the same, atomically and privately. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tconf.h"

static void full(conf_cluster *c)
{
    conf_defaults(c);
    free(c->listen);
    c->listen = strdup("::1");
    c->base_port = 0;
    c->token_file = strdup("/var/lib/ferry/token");
    c->call_timeout_ms = 1;
    c->ping_timeout_ms = 2147483647;
    c->heartbeat_ms = 0;
    c->start_timeout_ms = 3;
    c->shutdown_grace_ms = 4;
    c->threads = 1024;
    c->liveness_timeout_ms = 0;
    c->restart_backoff_ms = 5;
    c->restart_backoff_max_ms = 6;
    c->max_message_bytes = CONF_MAX_BYTES_LIMIT;
    c->max_module_bytes = CONF_MIN_BYTES_LIMIT;
    c->log_max_bytes = 4096;
    c->log_keep = 100;
    c->wedge_grace_ms = 7;
    c->metrics_port = 9100;
    c->supervisor_pid = 77;
    cr_assert_eq(conf_add_worker(c, "127.0.0.1:7100", NULL, 0), 0);
    cr_assert_eq(conf_add_worker(c, "[::1]:7101", NULL, 0), 0);
    cr_assert_eq(conf_add_worker(c, "gpu-host-2:65535", NULL, 0), 0);
}

static void expect_same(const conf_cluster *a, const conf_cluster *b)
{
    cr_expect_str_eq(a->listen, b->listen);
    cr_expect_eq(a->base_port, b->base_port);
    if (a->token_file || b->token_file) {
        cr_assert(a->token_file && b->token_file);
        cr_expect_str_eq(a->token_file, b->token_file);
    }
    cr_expect_eq(a->call_timeout_ms, b->call_timeout_ms);
    cr_expect_eq(a->ping_timeout_ms, b->ping_timeout_ms);
    cr_expect_eq(a->heartbeat_ms, b->heartbeat_ms);
    cr_expect_eq(a->start_timeout_ms, b->start_timeout_ms);
    cr_expect_eq(a->shutdown_grace_ms, b->shutdown_grace_ms);
    cr_expect_eq(a->threads, b->threads);
    cr_expect_eq(a->liveness_timeout_ms, b->liveness_timeout_ms);
    cr_expect_eq(a->restart_backoff_ms, b->restart_backoff_ms);
    cr_expect_eq(a->restart_backoff_max_ms, b->restart_backoff_max_ms);
    cr_expect_eq(a->max_message_bytes, b->max_message_bytes);
    cr_expect_eq(a->max_module_bytes, b->max_module_bytes);
    cr_expect_eq(a->log_max_bytes, b->log_max_bytes);
    cr_expect_eq(a->log_keep, b->log_keep);
    cr_expect_eq(a->wedge_grace_ms, b->wedge_grace_ms);
    cr_expect_eq(a->metrics_port, b->metrics_port);
    cr_expect_eq(a->supervisor_pid, b->supervisor_pid);
    cr_assert_eq(a->n_workers, b->n_workers);
    for (size_t i = 0; i < a->n_workers; i++) {
        cr_expect_str_eq(a->workers[i].address, b->workers[i].address);
        cr_expect_str_eq(a->workers[i].host, b->workers[i].host);
        cr_expect_eq(a->workers[i].port, b->workers[i].port);
        cr_expect_eq(a->workers[i].local, b->workers[i].local);
    }
}

T_TEST(conf_save, what_is_saved_loads_back_field_for_field)
{
    char path[512], err[CONF_ERR_LEN] = "";
    t_path(path, sizeof path, "cluster.ini");
    conf_cluster c, back;
    full(&c);
    cr_assert_eq(conf_save(&c, path), 0);
    conf_defaults(&back);
    cr_assert_eq(conf_load(&back, path, err, sizeof err), 0, "%s", err);
    expect_same(&c, &back);
    conf_fini(&back);
    conf_fini(&c);
}

T_TEST(conf_save, every_setting_is_written_even_at_its_default)
{
    char path[512], err[CONF_ERR_LEN] = "";
    t_path(path, sizeof path, "cluster.ini");
    conf_cluster c, back;
    conf_defaults(&c);
    cr_assert_eq(conf_save(&c, path), 0);
    /* Loaded over other values: each one written replaces its counterpart. */
    full(&back);
    cr_assert_eq(conf_load(&back, path, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(back.listen, c.listen);
    cr_expect_eq(back.base_port, c.base_port);
    cr_expect_eq(back.call_timeout_ms, c.call_timeout_ms);
    cr_expect_eq(back.ping_timeout_ms, c.ping_timeout_ms);
    cr_expect_eq(back.heartbeat_ms, c.heartbeat_ms);
    cr_expect_eq(back.start_timeout_ms, c.start_timeout_ms);
    cr_expect_eq(back.shutdown_grace_ms, c.shutdown_grace_ms);
    cr_expect_eq(back.threads, c.threads);
    cr_expect_eq(back.liveness_timeout_ms, c.liveness_timeout_ms);
    cr_expect_eq(back.restart_backoff_ms, c.restart_backoff_ms);
    cr_expect_eq(back.restart_backoff_max_ms, c.restart_backoff_max_ms);
    cr_expect_eq(back.max_message_bytes, c.max_message_bytes);
    cr_expect_eq(back.max_module_bytes, c.max_module_bytes);
    cr_expect_eq(back.log_max_bytes, c.log_max_bytes);
    cr_expect_eq(back.log_keep, c.log_keep);
    cr_expect_eq(back.metrics_port, 0);
    /* An unset token_file, no supervisor and no workers are left out, so
     * they do not override. */
    cr_expect_str_eq(back.token_file, "/var/lib/ferry/token");
    cr_expect_eq(back.supervisor_pid, 77);
    cr_expect_eq(back.n_workers, 3);
    char *text = t_read(path);
    cr_assert(text);
    cr_expect_null(strstr(text, "[state]"));
    cr_expect_null(strstr(text, "token_file"));
    free(text);
    conf_fini(&back);
    conf_fini(&c);
}

T_TEST(conf_save, the_file_is_private_and_replaces_the_old_one)
{
    const char *p = t_write("cluster.ini", "old contents\n", 0644);
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    conf_cluster c, back;
    full(&c);
    cr_assert_eq(conf_save(&c, path), 0);
    cr_expect_eq(t_mode(path), 0600);
    conf_defaults(&back);
    cr_assert_eq(conf_load(&back, path, NULL, 0), 0);
    cr_expect_eq(back.n_workers, 3);
    conf_fini(&back);
    conf_fini(&c);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

T_TEST(conf_save, no_temporary_file_is_left_behind)
{
    char path[512];
    t_path(path, sizeof path, "cluster.ini");
    conf_cluster c;
    full(&c);
    cr_assert_eq(conf_save(&c, path), 0);
    cr_assert_eq(conf_save(&c, path), 0);
    cr_expect_eq(count_entries(T_DIR), 1);
    conf_fini(&c);
}

T_TEST(conf_save, a_relative_token_file_is_written_absolute)
{
    char path[512], cwd[4096], expect[4200];
    t_path(path, sizeof path, "sub");
    cr_assert_eq(conf_mkdirs(path, 0700), 0);
    t_path(path, sizeof path, "sub/cluster.ini");
    cr_assert(getcwd(cwd, sizeof cwd));
    conf_cluster c, back;
    conf_defaults(&c);
    c.token_file = strdup("tok");
    cr_assert_eq(conf_save(&c, path), 0);
    conf_defaults(&back);
    cr_assert_eq(conf_load(&back, path, NULL, 0), 0);
    snprintf(expect, sizeof expect, "%s/tok", strcmp(cwd, "/") ? cwd : "");
    cr_expect_str_eq(back.token_file, expect);
    conf_fini(&back);
    conf_fini(&c);
}

T_TEST(conf_save, values_that_would_not_load_back_are_refused_and_nothing_is_written)
{
    char path[512];
    t_path(path, sizeof path, "cluster.ini");
    conf_cluster c;

    conf_defaults(&c);
    c.call_timeout_ms = 0;
    cr_expect_eq(conf_save(&c, path), FERRY_EINVAL, "timeout 0");
    conf_fini(&c);

    conf_defaults(&c);
    c.base_port = 65536;
    cr_expect_eq(conf_save(&c, path), FERRY_EINVAL, "port 65536");
    conf_fini(&c);

    conf_defaults(&c);
    c.token_file = strdup("/a ; b");
    cr_expect_eq(conf_save(&c, path), FERRY_EINVAL, "inline comment in a value");
    conf_fini(&c);

    conf_defaults(&c);
    c.token_file = strdup("/a\n[cluster]");
    cr_expect_eq(conf_save(&c, path), FERRY_EINVAL, "line end in a value");
    conf_fini(&c);

    conf_defaults(&c);
    free(c.listen);
    c.listen = strdup("two words");
    cr_expect_eq(conf_save(&c, path), FERRY_EINVAL, "listen not a host");
    conf_fini(&c);

    conf_defaults(&c);
    c.token_file = calloc(1, 300);
    memset(c.token_file, 'a', 299);
    c.token_file[0] = '/';
    cr_expect_eq(conf_save(&c, path), FERRY_EINVAL, "longer than a line");
    conf_fini(&c);

    cr_expect_eq(access(path, F_OK), -1, "nothing was written");
    cr_expect_eq(count_entries(T_DIR), 0);
}

T_TEST(conf_save, a_missing_directory_is_enoent)
{
    char path[512];
    t_path(path, sizeof path, "no/such/dir/cluster.ini");
    conf_cluster c;
    conf_defaults(&c);
    cr_expect_eq(conf_save(&c, path), FERRY_ENOENT);
    conf_fini(&c);
}
