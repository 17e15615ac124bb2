/* What every subcommand says the same way: its errors ("ferry CMD: ..."),
 * the cause found only once something failed said before them, and the
 * --json and --help options `status` and `submit` share. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>

#include "cli.h"

/* Said once, before the first error, when set (see cli_err_preface). */
static void (*preface)(void *);
static void *preface_arg;

void cli_err_preface(void (*fn)(void *), void *arg)
{
    preface = fn;
    preface_arg = arg;
}

void cli_err(const char *cmd, const char *fmt, ...)
{
    if (preface) {
        void (*fn)(void *) = preface;
        preface = NULL;
        fn(preface_arg);
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ferry %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_parse_json_flag(int argc, char **argv, const char *usage, bool *json)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    *json = false;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'j') {
            *json = true;
        } else if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        } else {
            fputs(usage, stderr);
            return CLI_USAGE;
        }
    }
    return 0;
}
