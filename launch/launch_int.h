/* launch — private header shared by the files of this folder:
 *   env.c        reading variables: present, numbers, addresses
 *   launchers.c  each launcher's variables, one reader a launcher
 *   slurm.c      Slurm's reader (node lists, reserved ports)
 *   detect.c     which launcher, FERRY_RENDEZVOUS and FERRY_WORLD_SIZE on
 *                top, launchers that disagree
 *   json.c       the log line and the JSON */
#ifndef FERRY_LAUNCH_INT_H
#define FERRY_LAUNCH_INT_H

#include "launch.h"

/* ---- env.c ---- */

/* The value of NAME in envp, or NULL when it is not there. */
const char *launch_get(char *const *envp, const char *name);

/* NAME as a whole number in lo..hi into *out. Returns 0, FERRY_ENOENT
 * (absent: nothing written to err), or FERRY_EINVAL with err set to
 * "NAME=value: expected ...". */
int launch_number(char *const *envp, const char *name, int lo, int hi, int *out,
                  char *err, size_t errlen);

/* launch_number(), but absent is FERRY_EINVAL too ("NAME is not set"). */
int launch_need(char *const *envp, const char *name, int lo, int hi, int *out, char *err,
                size_t errlen);

/* The rank and world's size from the two named variables (both required),
 * the rank below the size. Fills li->rank, world_size and the _from
 * fields. */
int launch_rank_world(char *const *envp, const char *rank_var, const char *world_var,
                      launch_info *li, char *err, size_t errlen);

/* An optional local rank (-1 when absent), below the named local size
 * when that is set too (local_size_var may be NULL). */
int launch_local_rank(char *const *envp, const char *var, const char *local_size_var,
                      launch_info *li, char *err, size_t errlen);

/* Rank 0's address from a host variable and a port variable, both
 * required: into li->host, li->port and address_from. */
int launch_host_port(char *const *envp, const char *host_var, const char *port_var,
                     launch_info *li, char *err, size_t errlen);

/* FERRY_RENDEZVOUS=HOST:PORT (or [v6]:PORT) into li. FERRY_ENOENT when it
 * is not set. */
int launch_rendezvous(char *const *envp, launch_info *li, char *err, size_t errlen);

/* ---- launchers.c, slurm.c ---- */

typedef struct launch_reader {
    launch_kind kind;
    const char *name, *title;
    /* Any of these set: this launcher started the process, or one around it. */
    const char *const *triggers;
    /* Reads rank, size, local rank and (where it has one) the address;
     * FERRY_EINVAL with err naming the variables. */
    int (*read)(char *const *envp, launch_info *li, char *err, size_t errlen);
} launch_reader;

/* Indexed by launch_kind; [LAUNCH_NONE] is empty. */
extern const launch_reader LAUNCH_READERS[LAUNCH_KINDS];

int launch_read_slurm(char *const *envp, launch_info *li, char *err, size_t errlen);

#endif
