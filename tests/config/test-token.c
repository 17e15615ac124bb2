/* The cluster token: created private and random, refused when shared or
 * malformed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tconf.h"

static bool all_hex(const char *s)
{
    for (; *s; s++)
        if (!strchr("0123456789abcdef", *s))
            return false;
    return true;
}

T_TEST(conf_token, create_writes_64_hex_characters_readable_only_by_the_owner)
{
    char path[512], tok[CONF_TOKEN_LEN + 1], err[CONF_ERR_LEN] = "";
    t_path(path, sizeof path, "token");
    cr_assert_eq(conf_token_create(path), 0);
    cr_expect_eq(t_mode(path), 0600);
    cr_assert_eq(conf_token_read(path, tok, sizeof tok, err, sizeof err), 0, "%s", err);
    cr_expect_eq(strlen(tok), CONF_TOKEN_LEN);
    cr_expect(all_hex(tok), "'%s'", tok);
    char *text = t_read(path);
    cr_assert(text);
    cr_expect_eq(strlen(text), CONF_TOKEN_LEN + 1);
    cr_expect_eq(strncmp(text, tok, CONF_TOKEN_LEN), 0);
    free(text);
}

T_TEST(conf_token, create_replaces_the_old_token_with_a_new_one)
{
    char path[512], a[CONF_TOKEN_LEN + 1], b[CONF_TOKEN_LEN + 1];
    t_path(path, sizeof path, "token");
    cr_assert_eq(conf_token_create(path), 0);
    cr_assert_eq(conf_token_read(path, a, sizeof a, NULL, 0), 0);
    chmod(path, 0644);
    cr_assert_eq(conf_token_create(path), 0);
    cr_expect_eq(t_mode(path), 0600, "the replacement is private again");
    cr_assert_eq(conf_token_read(path, b, sizeof b, NULL, 0), 0);
    cr_expect_str_neq(a, b);
}

T_TEST(conf_token, create_in_a_missing_directory_is_enoent)
{
    char path[512];
    t_path(path, sizeof path, "no/token");
    cr_expect_eq(conf_token_create(path), FERRY_ENOENT);
}

T_TEST(conf_token, a_token_readable_by_others_is_refused_with_the_fix)
{
    char tok[CONF_TOKEN_LEN + 1], err[CONF_ERR_LEN], expect[1400];
    char good[CONF_TOKEN_LEN + 2];
    memset(good, 'a', CONF_TOKEN_LEN);
    good[CONF_TOKEN_LEN] = '\n';
    good[CONF_TOKEN_LEN + 1] = '\0';
    static const struct {
        unsigned mode;
        const char *how;
    } loose[] = {{0644, "readable"},   {0640, "readable"},   {0604, "readable"},
                 {0620, "accessible"}, {0601, "accessible"}, {0400 | 040, "readable"}};
    for (size_t i = 0; i < sizeof loose / sizeof loose[0]; i++) {
        const char *path = t_write("token", good, loose[i].mode);
        strcpy(err, "unset");
        cr_expect_eq(conf_token_read(path, tok, sizeof tok, err, sizeof err),
                     FERRY_EACCES, "mode %04o", loose[i].mode);
        snprintf(expect, sizeof expect,
                 "token file %s is %s by others (mode %04o): run chmod 600 %s", path,
                 loose[i].how, loose[i].mode, path);
        cr_expect_str_eq(err, expect);
    }
    const char *path = t_write("token", good, 0400);
    cr_expect_eq(conf_token_read(path, tok, sizeof tok, NULL, 0), 0, "0400 is private");
}

T_TEST(conf_token, an_empty_or_malformed_token_is_einval)
{
    char tok[CONF_TOKEN_LEN + 1], err[CONF_ERR_LEN], expect[1200];
    char text[200];
    const char *path = t_write("token", "", 0600);
    cr_expect_eq(conf_token_read(path, tok, sizeof tok, err, sizeof err), FERRY_EINVAL);
    snprintf(expect, sizeof expect, "token file %s is empty", path);
    cr_expect_str_eq(err, expect);
    path = t_write("token", "\n\n", 0600);
    cr_expect_eq(conf_token_read(path, tok, sizeof tok, err, sizeof err), FERRY_EINVAL);
    cr_expect_str_eq(err, expect);

    static const struct {
        size_t len;
        char fill, odd;
    } bad[] = {{63, 'a', 0}, {65, 'a', 0}, {64, 'a', 'g'}, {64, 'a', ' '}, {128, 'f', 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(text, bad[i].fill, bad[i].len);
        if (bad[i].odd)
            text[10] = bad[i].odd;
        text[bad[i].len] = '\0';
        path = t_write("token", text, 0600);
        cr_expect_eq(conf_token_read(path, tok, sizeof tok, err, sizeof err),
                     FERRY_EINVAL, "case %zu", i);
        snprintf(expect, sizeof expect,
                 "token file %s holds no token (expected 64 hex characters)", path);
        cr_expect_str_eq(err, expect, "case %zu", i);
    }
}

T_TEST(conf_token, surrounding_newline_is_accepted_and_case_is_kept)
{
    char tok[CONF_TOKEN_LEN + 1], text[100];
    memset(text, 'A', CONF_TOKEN_LEN);
    strcpy(text + CONF_TOKEN_LEN, "\r\n");
    const char *path = t_write("token", text, 0600);
    cr_assert_eq(conf_token_read(path, tok, sizeof tok, NULL, 0), 0);
    text[CONF_TOKEN_LEN] = '\0';
    cr_expect_str_eq(tok, text);
}

T_TEST(conf_token, missing_file_directory_and_small_buffer_are_errors)
{
    char path[512], tok[CONF_TOKEN_LEN + 1], err[CONF_ERR_LEN] = "";
    t_path(path, sizeof path, "absent");
    cr_expect_eq(conf_token_read(path, tok, sizeof tok, err, sizeof err), FERRY_ENOENT);
    cr_expect_neq(strstr(err, path), NULL, "the message names the file: %s", err);
    cr_expect_eq(conf_token_read(T_DIR, tok, sizeof tok, err, sizeof err), FERRY_EINVAL,
                 "a directory");
    t_path(path, sizeof path, "token");
    cr_assert_eq(conf_token_create(path), 0);
    cr_expect_eq(conf_token_read(path, tok, CONF_TOKEN_LEN, NULL, 0), FERRY_ERANGE);
}
