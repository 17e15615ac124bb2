/* conf_is_wildcard: the hosts that mean "every interface", as
 * conf_split_address gives them, and no other. */
#include <string.h>

#include "tconf.h"

T_TEST(conf_wildcard, every_interface_is_a_wildcard_and_no_named_host_is)
{
    static const char *const yes[] = {"", "0.0.0.0", "::"};
    static const char *const no[] = {
        "127.0.0.1", "::1", "localhost", "gpu-host", "0.0.0.1", "0:0::0", "[::]", " ",
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        cr_expect(conf_is_wildcard(yes[i]), "'%s' is a wildcard", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        cr_expect_not(conf_is_wildcard(no[i]), "'%s' is not a wildcard", no[i]);
    cr_expect_not(conf_is_wildcard(NULL));
}

T_TEST(conf_wildcard, a_listen_address_on_every_interface_splits_into_a_wildcard)
{
    static const char *const wild[] = {"0.0.0.0:7100", "[::]:0"};
    char host[256];
    int port;
    for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++) {
        cr_assert_eq(conf_split_address(wild[i], host, sizeof host, &port), 0, "%s",
                     wild[i]);
        cr_expect(conf_is_wildcard(host), "'%s' listens everywhere", wild[i]);
    }
    cr_assert_eq(conf_split_address("10.0.0.1:7100", host, sizeof host, &port), 0);
    cr_expect_not(conf_is_wildcard(host));
}
