/* The hosts of tests/multihost speaking TLS to one another: certificates
 * made for the hosts' addresses (tests/tls/mkcerts.sh), every worker
 * started with them and mutual TLS, `ferry start` given the same; a sync
 * training across the three hosts, then shutdown, all of it over TLS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "mhcluster.h"
#include "tcommon.h"

TestSuite(multihost_tls, .init = mhc_setup, .fini = mhc_teardown, .timeout = 500);

static char cert[512], key[512], ca[512];

/* The certificates in the test's directory, naming the three hosts. */
static mhc_flags tls_flags(void)
{
    char cmd[2048], san[256] = "";
    for (int w = 0; w < MHC_WORKERS; w++) {
        size_t n = strlen(san);
        snprintf(san + n, sizeof san - n, "%sIP:%s", w ? "," : "", mhc_net.addr[w]);
    }
    snprintf(cmd, sizeof cmd, "SAN='%s' sh '%s/tests/tls/mkcerts.sh' '%s/certs' >/dev/null",
             san, getenv("FERRY_TEST_SOURCE"), mhc_dir());
    cr_assert(system(cmd) == 0, "mkcerts.sh failed: %s", cmd);
    snprintf(cert, sizeof cert, "%s/certs/server.pem", mhc_dir());
    snprintf(key, sizeof key, "%s/certs/server.key", mhc_dir());
    snprintf(ca, sizeof ca, "%s/certs/ca.pem", mhc_dir());
    return (mhc_flags){
        {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, NULL},
        {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, NULL},
    };
}

Test(multihost_tls, sync_training_across_three_hosts_over_mutual_tls)
{
    mhc_flags f = tls_flags();
    mhc_start(&f);

    mhc_run r;
    mhc_ferry(&r, 300000, "submit", mhc_task("mlp"), "--mode", "sync", "--epochs", "1",
              "--json", NULL);
    MHC_EXPECT(&r, 0);
    cr_assert(mhc_has(r.out, "\"mode\":\"sync\""), "%s", r.out);
    cr_assert_eq(mhc_json_number(r.out, "workers"), MHC_WORKERS, "%s", r.out);
    cr_assert(mhc_json_number(r.out, "test_accuracy") >= 0.80, "%s", r.out);
    cr_assert(mhc_has(r.out, "\"params_identical\":true"), "%s", r.out);
    mhc_run_fini(&r);

    mhc_expect_shutdown();
    tcom_assert_no_leaks();
}
