/* Strings: text from the wire made safe for a log line or a status text
 * (names a client chose, a module's or a method's, may hold escape
 * sequences, newlines or 100 KB), and a strdup that takes NULL. */
#include <stdio.h>
#include <string.h>

#include "base.h"

char *base_escape(char *dst, size_t dstlen, const char *src, size_t srclen)
{
    static const char hex[] = "0123456789abcdef";
    /* Room kept for the mark of a cut: "...(18446744073709551615 bytes)". */
    size_t room = dstlen > 40 ? dstlen - 40 : 0, n = 0, i = 0;
    for (; i < srclen; i++) {
        unsigned char c = (unsigned char)src[i];
        size_t need = c == '\\' ? 2 : (c < 0x20 || c > 0x7e) ? 4 : 1;
        if (n + need > room)
            break;
        if (need == 1) {
            dst[n++] = (char)c;
        } else if (need == 2) {
            dst[n++] = '\\';
            dst[n++] = '\\';
        } else {
            dst[n++] = '\\';
            dst[n++] = 'x';
            dst[n++] = hex[c >> 4];
            dst[n++] = hex[c & 15];
        }
    }
    if (i < srclen)
        snprintf(dst + n, dstlen - n, "...(%zu bytes)", srclen);
    else if (dstlen)
        dst[n] = '\0';
    return dst;
}

char *base_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}
