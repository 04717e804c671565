/* zt_diag: a list of validation errors and warnings. Each names the source
 * (file, or the command-line flag that set the value), the position when
 * known, the field path, the bad value and the rule. */
#ifndef ZT_DIAG_H
#define ZT_DIAG_H
#include <stdbool.h>
#include <stdio.h>

typedef struct zt_diag_t zt_diag_t;

zt_diag_t *zt_diag_new(void);
void zt_diag_destroy(zt_diag_t **self_p);
/* value may be NULL (field missing). line/col 0 when unknown. */
void zt_diag_add(zt_diag_t *self, bool is_error, const char *source, int line, int col,
                 const char *path, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
int zt_diag_errors(zt_diag_t *self);
int zt_diag_size(zt_diag_t *self);
/* The i-th message, formatted "SOURCE:LINE:COL: error: PATH = VALUE: RULE". */
const char *zt_diag_text(zt_diag_t *self, int i);
void zt_diag_print(zt_diag_t *self, FILE *out);
void zt_diag_selftest(void);

#endif
