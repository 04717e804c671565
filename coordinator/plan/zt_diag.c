#include "plan/zt_diag.h"
#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct zt_diag_t {
    char **lines;   /* formatted messages, in order of discovery */
    int size;       /* number of messages */
    int cap;        /* allocated slots */
    int errors;     /* how many are errors (the rest are warnings) */
};

zt_diag_t *zt_diag_new(void)
{
    return calloc(1, sizeof(zt_diag_t));
}

void zt_diag_destroy(zt_diag_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_diag_t *self = *self_p;
    for (int i = 0; i < self->size; i++)
        free(self->lines[i]);
    free(self->lines);
    free(self);
    *self_p = NULL;
}

void zt_diag_add(zt_diag_t *self, bool is_error, const char *source, int line, int col,
                 const char *path, const char *value, const char *fmt, ...)
{
    char rule[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rule, sizeof rule, fmt, ap);
    va_end(ap);
    char pos[48] = "";
    if (line > 0)
        snprintf(pos, sizeof pos, ":%d:%d", line, col);
    char *text = NULL;
    int rc;
    if (path && *path && value)
        rc = asprintf(&text, "%s%s: %s: %s = %s: %s", source, pos,
                      is_error ? "error" : "warning", path, value, rule);
    else if (path && *path)
        rc = asprintf(&text, "%s%s: %s: %s: %s", source, pos,
                      is_error ? "error" : "warning", path, rule);
    else
        rc = asprintf(&text, "%s%s: %s: %s", source, pos, is_error ? "error" : "warning", rule);
    if (rc < 0)
        return;
    if (self->size == self->cap) {
        int cap = self->cap ? self->cap * 2 : 8;
        char **nl = realloc(self->lines, (size_t) cap * sizeof *nl);
        if (!nl) {
            free(text);
            return;
        }
        self->lines = nl;
        self->cap = cap;
    }
    self->lines[self->size++] = text;
    if (is_error)
        self->errors++;
}

int zt_diag_errors(zt_diag_t *self) { return self->errors; }
int zt_diag_size(zt_diag_t *self) { return self->size; }

const char *zt_diag_text(zt_diag_t *self, int i)
{
    return (i >= 0 && i < self->size) ? self->lines[i] : NULL;
}

void zt_diag_print(zt_diag_t *self, FILE *out)
{
    for (int i = 0; i < self->size; i++)
        fprintf(out, "%s\n", self->lines[i]);
}

void zt_diag_selftest(void)
{
    zt_diag_t *d = zt_diag_new();
    zt_diag_add(d, false, "a.json", 0, 0, "x", NULL, "unknown field, ignored");
    zt_diag_add(d, true, "a.json", 3, 7, "workerPoolSpecs[0].replicaCount", "2", "must be %d", 1);
    assert(zt_diag_size(d) == 2 && zt_diag_errors(d) == 1);
    assert(!strcmp(zt_diag_text(d, 0), "a.json: warning: x: unknown field, ignored"));
    assert(!strcmp(zt_diag_text(d, 1),
                   "a.json:3:7: error: workerPoolSpecs[0].replicaCount = 2: must be 1"));
    zt_diag_destroy(&d);
    zt_diag_destroy(&d);
    assert(d == NULL);
}
