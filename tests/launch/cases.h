/* tests/launch — the host lists every expansion test and the comparison
 * with `scontrol show hostnames` share. Each accepted case's hosts were
 * printed by Slurm 22.05's scontrol (Debian 12); the first four are the
 * ones the multi-host notes give. */
#ifndef FERRY_TESTS_LAUNCH_CASES_H
#define FERRY_TESTS_LAUNCH_CASES_H

#include <stdbool.h>

typedef struct hl_case {
    const char *list;
    const char *hosts; /* joined by single spaces */
} hl_case;

static const hl_case HL_GOOD[] = {
    {"n[1-3,07-08]", "n1 n2 n3 n07 n08"},
    {"rack[1-2]-n[01-02]", "rack1-n01 rack1-n02 rack2-n01 rack2-n02"},
    {"n[1-4]", "n1 n2 n3 n4"},
    {"127.0.1.[1-4]", "127.0.1.1 127.0.1.2 127.0.1.3 127.0.1.4"},
    {"n[1-2]", "n1 n2"},
    {"n1", "n1"},
    {"x07", "x07"},
    {"n[07]", "n07"},
    {"n[9-11]", "n9 n10 n11"},
    {"n[08-11]", "n08 n09 n10 n11"},
    {"n[001-3]", "n001 n002 n003"},
    {"n[1-2,5-6]", "n1 n2 n5 n6"},
    {"n[3,1,2]", "n3 n1 n2"},
    {"n1,n1", "n1 n1"},
    {"a,b[1-2],c", "a b1 b2 c"},
    {"n[1-2],m[3-4]", "n1 n2 m3 m4"},
    {"n1 n2", "n1 n2"},
    {"[1-2]", "1 2"},
    {"a.b[1-2]", "a.b1 a.b2"},
    {"n[1-2][3-4]", "n13 n14 n23 n24"},
    /* Three groups: the middle one varies slowest, then the first. */
    {"n[1-2]-x[3-4]-y[5-6]",
     "n1-x3-y5 n1-x3-y6 n2-x3-y5 n2-x3-y6 n1-x4-y5 n1-x4-y6 n2-x4-y5 n2-x4-y6"},
    {"a[1-2]b[3-4]c[5-6]d[7-8]",
     "a1b3c5d7 a1b3c5d8 a2b3c5d7 a2b3c5d8 a1b4c5d7 a1b4c5d8 a2b4c5d7 a2b4c5d8 "
     "a1b3c6d7 a1b3c6d8 a2b3c6d7 a2b3c6d8 a1b4c6d7 a1b4c6d8 a2b4c6d7 a2b4c6d8"},
};

typedef struct hl_bad {
    const char *list;
    const char *message; /* what the refusal says, position included */
    bool slurm_refuses;  /* scontrol refuses it too ("Invalid hostlist") */
} hl_bad;

static const hl_bad HL_BAD[] = {
    {"n[1-2", "this '[' is not closed at character 2 of host list 'n[1-2'", false},
    {"n1]", "a ']' that closes no '[' at character 3 of host list 'n1]'", false},
    {"n[3-1]", "the range '3-1' runs backwards at character 3 of host list 'n[3-1]'",
     true},
    {"n[1-100000]",
     "the range '1-100000' has more than 65536 hosts at character 3 of host list "
     "'n[1-100000]'",
     true},
    {"n[]", "expected a number at character 3 of host list 'n[]'", true},
    {"n[1,]", "expected a number at character 5 of host list 'n[1,]'", true},
    {"n[-1]", "expected a number at character 3 of host list 'n[-1]'", true},
    {"n[a]", "expected a number at character 3 of host list 'n[a]'", true},
    {"n[1-2-3]", "expected ',' or ']' at character 6 of host list 'n[1-2-3]'", true},
    {"n[1x]", "expected ',', '-' or ']' at character 4 of host list 'n[1x]'", true},
    {"n[[1]]", "a '[' inside brackets at character 3 of host list 'n[[1]]'", true},
    {"n[1-2]a",
     "text after the last ']' (Slurm expands no suffix) at character 7 of host list "
     "'n[1-2]a'",
     true},
    {"n[1-3].ib", "text after the last ']' (Slurm expands no suffix) at character 7",
     true},
    {"n1,,n2", "an empty host name at character 4 of host list 'n1,,n2'", false},
    {",n1", "an empty host name at character 1 of host list ',n1'", false},
    {"n1,", "an empty host name at character 4 of host list 'n1,'", false},
    {"", "an empty host name at character 1 of host list ''", false},
    {"n1:7100", "an unexpected ':' (expected a host name) at character 3", false},
    {"n[0-65535],m[0-1]", "more than 65536 hosts in all, reached at character 12", false},
    {"a[1-300]b[1-300]", "an item of more than 65536 hosts at character 1", false},
    {"n[0-65535,0-1]", "a bracket group of more than 65536 hosts at character 2", false},
    {"n[1-1234567890123456789]", "a number of more than 18 digits at character 5", false},
};

#endif
