/* `ferry checkpoint show FILE`: a checkpoint's header as it was written,
 * after checking the whole file against its checksum. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "runtime/train/ckpt_file.h"

static const char usage[] =
    "usage: ferry checkpoint show FILE\n"
    "\n"
    "Checks a checkpoint written by `ferry submit --checkpoint-dir` against its\n"
    "checksum and prints its header: the model, the epoch and step it was\n"
    "written at, the run's options and the generator's state, one KEY VALUE\n"
    "a line, then the sections' sizes and the checksum.\n";

int cli_checkpoint(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (argc != 3 || strcmp(argv[1], "show") != 0) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    rt_ckpt_file f;
    char why[512];
    if (rt_ckpt_read(argv[2], &f, why, sizeof why) != 0) {
        cli_err("checkpoint", "%s: %s", argv[2], why);
        return CLI_FAIL;
    }
    fputs(f.text, stdout);
    printf("sha256 %s (checked)\n", f.sha256);
    rt_ckpt_file_free(&f);
    return CLI_OK;
}
