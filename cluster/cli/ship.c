/* `ferry submit --ship-data`: the files a run's data options name sent to
 * every worker that lacks them, and the options pointed at the workers' copies. A
 * directory goes as its regular files and a listing of them, which a worker turns back
 * into a directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#define REF_LEN 600

/* What the run's options name the shipped files by, for as long as the
 * command runs. */
static char refs[4][REF_LEN];

/* Ships one open file; says what it did unless `quiet`. */
static int ship_fd(cluster *cl, int fd, uint64_t size, const char *name, char *ref,
                   bool quiet)
{
    size_t sent = 0;
    int rc = cluster_ship_fd(cl, fd, size, name, ref, REF_LEN, &sent);
    if (rc)
        cli_err("submit", "--ship-data: %s", cluster_error(cl));
    else if (!quiet && sent)
        fprintf(stderr, "ferry submit: shipped %s (%.1f MiB) to %zu of %zu workers\n",
                name, (double)size / (1 << 20), sent, cluster_size(cl));
    return rc;
}

static int ship_file(cluster *cl, const char *path, char *ref, bool quiet)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cli_err("submit", "--ship-data: cannot read %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return FERRY_EIO;
    }
    int rc = ship_fd(cl, fd, (uint64_t)st.st_size, cli_base_name(path), ref, quiet);
    close(fd);
    return rc;
}

/* Each regular file of `dir` (sorted), then the listing, "<sha256> <name>"
 * a line, whose reference the run names the directory by. */
static int ship_dir(cluster *cl, const char *dir, char *ref, bool quiet)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        cli_err("submit", "--ship-data: cannot list %s: %s", dir, strerror(errno));
        return FERRY_EIO;
    }
    int listing = memfd_create("ferry-dir", MFD_CLOEXEC),
        rc = listing < 0 ? FERRY_ENOMEM : 0;
    for (int i = 0; i < n; i++) {
        char path[CLI_PATH_MAX], one[REF_LEN];
        struct stat st;
        bool file = rc == 0 && names[i]->d_name[0] != '.' &&
                    snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name) <
                        (int)sizeof path &&
                    stat(path, &st) == 0 && S_ISREG(st.st_mode);
        if (file && (rc = ship_file(cl, path, one, quiet)) == 0)
            dprintf(listing, "%.64s %s\n", one + strlen(PROTO_DATA_REF_PREFIX),
                    names[i]->d_name);
        free(names[i]);
    }
    free(names);
    struct stat st;
    if (rc == 0 && fstat(listing, &st) == 0)
        rc = ship_fd(cl, listing, (uint64_t)st.st_size, ".ferry-dir", ref, true);
    if (listing >= 0)
        close(listing);
    return rc;
}

int cli_ship_data(cluster *cl, cluster_train_opts *o, bool quiet)
{
    const char **opts[] = {&o->data_dir, &o->labels, &o->test_data, &o->test_labels};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        const char *path = *opts[i];
        struct stat st;
        if (!path || !path[0])
            continue;
        if (stat(path, &st) != 0) {
            cli_err("submit", "--ship-data: cannot read %s: %s", path, strerror(errno));
            return FERRY_ENOENT;
        }
        int rc = S_ISDIR(st.st_mode) ? ship_dir(cl, path, refs[i], quiet)
                                     : ship_file(cl, path, refs[i], quiet);
        if (rc)
            return rc;
        *opts[i] = refs[i];
    }
    return 0;
}
