/* zt_doc: a job or study document (JSON or YAML) loaded into one jansson
 * tree, with the source position of every field path and the command-line
 * flag that set it, so that every error can say where the value came from. */
#ifndef ZT_DOC_H
#define ZT_DOC_H
#include <jansson.h>
#include "plan/zt_diag.h"

typedef struct {
    json_t *root;       /* the document */
    char *source;       /* file path as given, or "command line" */
    json_t *positions;  /* path -> [line, col] (1-based), where known */
    json_t *origins;    /* path -> "--flag" for values set on the command line */
} zt_doc_t;

/* Loads path; YAML when it ends in .yaml/.yml, else JSON. On a syntax error
 * adds it (with line and column) to diag and returns ZT_ESPEC. */
int zt_doc_load(const char *path, zt_doc_t **doc_p, zt_diag_t *diag);
/* Parses text already in memory; source names it in messages. */
int zt_doc_parse(const char *source, const char *text, int is_yaml, zt_doc_t **doc_p,
                 zt_diag_t *diag);
/* An empty document (object root) for jobs given only by flags. */
zt_doc_t *zt_doc_new_empty(const char *source);
void zt_doc_destroy(zt_doc_t **self_p);

/* Records that path was set by flag (messages then name the flag). */
void zt_doc_set_origin(zt_doc_t *self, const char *path, const char *flag);
/* Adds a diagnostic about path, with the source/position/flag of path.
 * value may be NULL; it is rendered compactly as JSON. */
void zt_doc_report(zt_doc_t *self, zt_diag_t *diag, int is_error, const char *path,
                   const json_t *value, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* zt_doc_report's error and warning, for readers that hold the document
 * and its diagnostics themselves. */
#define ZT_DOC_ERR(doc, diag, path, val, ...)  zt_doc_report((doc), (diag), 1, (path), (val), __VA_ARGS__)
#define ZT_DOC_WARN(doc, diag, path, val, ...) zt_doc_report((doc), (diag), 0, (path), (val), __VA_ARGS__)

/* Reports every field of obj (at path) whose name is not in known
 * (NULL-terminated): an error naming the nearest known name ("did you
 * mean"), or the known names; only a warning when allow (a spec written
 * for a newer service: --allow-unknown-fields). */
void zt_doc_check_unknown(zt_doc_t *self, zt_diag_t *diag, json_t *obj, const char *path,
                          const char *const *known, bool allow);
/* The known name nearest to name by edit distance, or NULL when none is
 * near enough to be a typo of it. */
const char *zt_doc_nearest(const char *name, const char *const *known);

#endif
