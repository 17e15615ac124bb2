/* tests/runs — a private FERRY_HOME-like directory a test, and a writer. */
#ifndef FERRY_TESTS_RUNS_HARNESS_H
#define FERRY_TESTS_RUNS_HARNESS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char runs_home[];

void runs_home_make(void);
void runs_home_remove(void);

/* Replaces `path` with `text`. */
static inline void runs_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

#endif
