/* zt_text: text from outside (a peer's message, a program's output, a
 * file another user may have written) made safe before a terminal or a log
 * line shows it. UTF-8 is checked where strings come off the wire; escaping
 * is done where text is shown, so that no control sequence (ESC[2J, an OSC
 * that retitles the terminal, a carriage return) acts and no newline forges
 * a line of its own. */
#ifndef ZT_TEXT_H
#define ZT_TEXT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Whether s[0..n) is well-formed UTF-8: no overlong form, no surrogate,
 * nothing past U+10FFFF. */
bool zt_utf8_valid(const char *s, size_t n);

/* in[0..n) into out (size bytes, NUL-terminated, cut at a whole character)
 * as text safe to show: well-formed UTF-8 other than control characters
 * is kept; a control character (C0 but tab, DEL, C1) or a byte that is not
 * UTF-8 becomes \xNN, and a newline becomes nl (NULL: \x0a too). Returns
 * the length written. */
size_t zt_text_escape(char *out, size_t size, const char *in, size_t n, const char *nl);

/* zt_text_escape of a NUL-terminated string into a buffer of its own per
 * thread and slot (0..3), for a printf argument: "%s", zt_text_safe(s, 0).
 * Longer text is cut at 1 KiB. NULL gives "". */
const char *zt_text_safe(const char *s, int slot);

/* Writes the text as safe lines to f (fputs of zt_text_escape, newlines
 * kept). */
void zt_text_print(FILE *f, const char *s);

#endif
