#include "base/zt_text.h"
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* The length of the well-formed UTF-8 character at s (at most n bytes),
 * or 0 when it is not one. */
static size_t s_char_len(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
               : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    /* overlong three- and four-byte forms, surrogates, past U+10FFFF */
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0) || (s[0] == 0xF0 && s[1] < 0x90) ||
        (s[0] == 0xF4 && s[1] >= 0x90))
        return 0;
    return len;
}

bool zt_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *) s;
    for (size_t i = 0; i < n;) {
        size_t len = s_char_len(p + i, n - i);
        if (!len)
            return false;
        i += len;
    }
    return true;
}

size_t zt_text_escape(char *out, size_t size, const char *in, size_t n, const char *nl)
{
    const unsigned char *p = (const unsigned char *) in;
    size_t o = 0, nll = nl ? strlen(nl) : 0;
    if (!size)
        return 0;
    for (size_t i = 0; i < n;) {
        size_t len = s_char_len(p + i, n - i);
        bool control = len == 1 ? (p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7F
                                : len == 2 && p[i] == 0xC2 && p[i + 1] < 0xA0; /* C1: U+0080..U+009F */
        const char *put = (const char *) p + i;
        size_t put_len = len;
        char esc[8];
        if (nl && len == 1 && p[i] == '\n') {
            put = nl;
            put_len = nll;
        }
        else if (!len || control) {
            snprintf(esc, sizeof esc, "\\x%02x", p[i]);
            put = esc;
            put_len = 4;
            len = 1; /* byte by byte: a C1 character is two escapes */
        }
        if (o + put_len >= size)
            break;
        memcpy(out + o, put, put_len);
        o += put_len;
        i += len;
    }
    out[o] = '\0';
    return o;
}

const char *zt_text_safe(const char *s, int slot)
{
    static __thread char buf[4][1024];
    char *b = buf[slot & 3];
    zt_text_escape(b, sizeof buf[0], s ? s : "", s ? strlen(s) : 0, NULL);
    return b;
}

void zt_text_print(FILE *f, const char *s)
{
    size_t n = strlen(s), cap = 4 * n + 1;
    char stackbuf[4096], *out = cap <= sizeof stackbuf ? stackbuf : malloc(cap);
    if (!out)
        return;
    zt_text_escape(out, cap, s, n, "\n");
    fputs(out, f);
    if (out != stackbuf)
        free(out);
}
