/* Small helpers shared by libztrain and the roles: text, and (included
 * here for their many users) time, files and folders, ports, processes,
 * each in a file of its own. */
#ifndef ZT_UTIL_H
#define ZT_UTIL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/zt_files.h"
#include "base/zt_ports.h"
#include "base/zt_proc.h"
#include "base/zt_time.h"

/* Parses a whole decimal integer; false if text is not exactly one. */
bool zt_parse_int(const char *text, long long *out);
/* printf into a fresh heap string. */
char *zt_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Frees a NULL-terminated array of strings and the strings (NULL: nothing). */
void zt_strv_free(char **v);

#endif
