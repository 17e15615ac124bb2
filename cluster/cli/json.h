/* Writing JSON strings for --json output (RFC 8259 escaping). */
#ifndef FERRY_CLI_JSON_H
#define FERRY_CLI_JSON_H

#include <stdio.h>

/* Writes `s` as a JSON string literal, quotes included; NULL as "". */
static inline void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

#endif
