/* The cluster file's TLS keys: tls_cert, tls_key and tls_ca are file names
 * taken against the file's directory, insecure is 0 or 1, and all four
 * come back from conf_save() as they went in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tconf.h"

T_TEST(tls_keys, are_read_absolute_against_the_files_directory)
{
    const char *path = t_write("c.ini",
                               "[cluster]\n"
                               "tls_cert = certs/server.pem\n"
                               "tls_key = /etc/ferry/server.key\n"
                               "tls_ca = ca.pem\n"
                               "insecure = 1\n",
                               0600);
    conf_cluster c;
    conf_defaults(&c);
    char err[CONF_ERR_LEN] = "", want[512];
    cr_assert_eq(conf_load(&c, path, err, sizeof err), 0, "%s", err);
    snprintf(want, sizeof want, "%s/certs/server.pem", T_DIR);
    cr_expect_str_eq(c.tls_cert, want);
    cr_expect_str_eq(c.tls_key, "/etc/ferry/server.key");
    snprintf(want, sizeof want, "%s/ca.pem", T_DIR);
    cr_expect_str_eq(c.tls_ca, want);
    cr_expect_eq(c.insecure, 1);
    conf_fini(&c);
}

T_TEST(tls_keys, default_to_plain_text_and_refuse_a_wrong_insecure)
{
    conf_cluster c;
    conf_defaults(&c);
    cr_expect_null(c.tls_cert);
    cr_expect_null(c.tls_ca);
    cr_expect_eq(c.insecure, 0);
    const char *path = t_write("bad.ini", "[cluster]\ninsecure = yes\n", 0600);
    char err[CONF_ERR_LEN] = "";
    cr_assert_eq(conf_load(&c, path, err, sizeof err), FERRY_EINVAL);
    cr_expect(strstr(err, "bad.ini:2: insecure: expected a flag from 0 to 1, got 'yes'"),
              "%s", err);
    conf_fini(&c);
}

T_TEST(tls_keys, come_back_from_a_saved_file)
{
    conf_cluster c, back;
    conf_defaults(&c);
    conf_defaults(&back);
    c.tls_cert = strdup("/x/server.pem");
    c.tls_key = strdup("/x/server.key");
    c.tls_ca = strdup("/x/ca.pem");
    char err[CONF_ERR_LEN] = "", path[512];
    t_path(path, sizeof path, "saved.ini");
    cr_assert_eq(conf_save(&c, path), 0);
    cr_assert_eq(conf_load(&back, path, err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(back.tls_cert, "/x/server.pem");
    cr_expect_str_eq(back.tls_key, "/x/server.key");
    cr_expect_str_eq(back.tls_ca, "/x/ca.pem");
    cr_expect_eq(back.insecure, 0);
    conf_fini(&back);
    conf_defaults(&back);
    c.insecure = 1;
    free(c.tls_cert);
    free(c.tls_key);
    free(c.tls_ca);
    c.tls_cert = c.tls_key = c.tls_ca = NULL;
    cr_assert_eq(conf_save(&c, path), 0);
    cr_assert_eq(conf_load(&back, path, err, sizeof err), 0, "%s", err);
    cr_expect_null(back.tls_cert);
    cr_expect_eq(back.insecure, 1);
    conf_fini(&back);
    conf_fini(&c);
}
