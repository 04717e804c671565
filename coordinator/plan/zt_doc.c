#include "plan/zt_doc.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

static zt_doc_t *s_doc_new(const char *source)
{
    zt_doc_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->source = strdup(source);
    self->positions = json_object();
    self->origins = json_object();
    return self;
}

zt_doc_t *zt_doc_new_empty(const char *source)
{
    zt_doc_t *self = s_doc_new(source);
    if (self)
        self->root = json_object();
    return self;
}

void zt_doc_destroy(zt_doc_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zt_doc_t *self = *self_p;
    json_decref(self->root);
    json_decref(self->positions);
    json_decref(self->origins);
    free(self->source);
    free(self);
    *self_p = NULL;
}

/* A plain YAML scalar resolved the way PyYAML (and so gcloud) does for the
 * cases job files use: null, booleans, integers, floats, else string. */
static json_t *s_yaml_scalar(const char *v, size_t len, int plain)
{
    if (!plain)
        return json_stringn(v, len);
    if (len == 0 || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL"))
        return json_null();
    static const char *yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON" };
    static const char *no[] = { "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF" };
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (!strcmp(v, yes[i])) return json_true();
        if (!strcmp(v, no[i]))  return json_false();
    }
    long long n;
    if (zt_parse_int(v, &n))
        return json_integer(n);
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (!errno && end != v && !*end && (v[0] == '-' || v[0] == '+' || v[0] == '.' ||
                                        (v[0] >= '0' && v[0] <= '9')) && isfinite(d))
        return json_real(d);
    return json_stringn(v, len);
}

/* Walks a libyaml node; builds the json value (when want_value) and records
 * the position of every path. Returns NULL only on allocation failure or a
 * duplicate key (then *dup is set to the key's path). */
static json_t *s_yaml_walk(yaml_document_t *ydoc, yaml_node_t *node, const char *path,
                           json_t *positions, int want_value, char **dup, int depth)
{
    if (depth > 64)
        return json_null();
    json_object_set_new(positions, path, json_pack("[ii]", (int) node->start_mark.line + 1,
                                                   (int) node->start_mark.column + 1));
    switch (node->type) {
    case YAML_SCALAR_NODE:
        if (!want_value)
            return json_null();
        return s_yaml_scalar((const char *) node->data.scalar.value, node->data.scalar.length,
                             node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE);
    case YAML_SEQUENCE_NODE: {
        json_t *arr = json_array();
        int i = 0;
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             it < node->data.sequence.items.top; it++, i++) {
            char sub[1024];
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            json_t *v = s_yaml_walk(ydoc, yaml_document_get_node(ydoc, *it), sub, positions,
                                    want_value, dup, depth + 1);
            if (!v) {
                json_decref(arr);
                return NULL;
            }
            json_array_append_new(arr, v);
        }
        return arr;
    }
    case YAML_MAPPING_NODE: {
        json_t *obj = json_object();
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
             p < node->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(ydoc, p->key);
            const char *key = (k && k->type == YAML_SCALAR_NODE)
                                  ? (const char *) k->data.scalar.value : "?";
            char sub[1024];
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", key);
            if (want_value && json_object_get(obj, key)) {
                *dup = strdup(sub);
                json_decref(obj);
                return NULL;
            }
            json_t *v = s_yaml_walk(ydoc, yaml_document_get_node(ydoc, p->value), sub,
                                    positions, want_value, dup, depth + 1);
            if (!v) {
                json_decref(obj);
                return NULL;
            }
            json_object_set_new(obj, key, v);
            /* A field's position is its key's: "line:col" points at the name. */
            if (k)
            json_object_set_new(positions, sub, json_pack("[ii]", (int) k->start_mark.line + 1,
                                                          (int) k->start_mark.column + 1));
        }
        return obj;
    }
    default:
        return json_null();
    }
}

/* Parses text with libyaml. want_value: build the tree (YAML files); else only
 * record positions (JSON files: jansson gives the values). */
static int s_yaml_parse(zt_doc_t *self, const char *text, int want_value, zt_diag_t *diag)
{
    yaml_parser_t parser;
    yaml_document_t ydoc;
    int rc = ZT_OK;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *) text, strlen(text));
    if (!yaml_parser_load(&parser, &ydoc)) {
        if (want_value)
            zt_diag_add(diag, true, self->source, (int) parser.problem_mark.line + 1,
                        (int) parser.problem_mark.column + 1, NULL, NULL, "malformed YAML: %s%s%s",
                        parser.problem ? parser.problem : "syntax error",
                        parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return ZT_ESPEC;
    }
    yaml_node_t *root = yaml_document_get_root_node(&ydoc);
    if (want_value) {
        char *dup = NULL;
        if (!root) {
            zt_diag_add(diag, true, self->source, 1, 1, NULL, NULL, "the document is empty");
            rc = ZT_ESPEC;
        }
        else if (!(self->root = s_yaml_walk(&ydoc, root, "", self->positions, 1, &dup, 0))) {
            json_t *pos = json_object_get(self->positions, dup ? dup : "");
            zt_diag_add(diag, true, self->source, (int) json_integer_value(json_array_get(pos, 0)),
                        (int) json_integer_value(json_array_get(pos, 1)), dup, NULL,
                        "duplicate key");
            rc = ZT_ESPEC;
        }
        free(dup);
    }
    else if (root) {
        char *dup = NULL;
        json_decref(s_yaml_walk(&ydoc, root, "", self->positions, 0, &dup, 0));
        free(dup);
    }
    yaml_document_delete(&ydoc);
    yaml_parser_delete(&parser);
    return rc;
}

int zt_doc_parse(const char *source, const char *text, int is_yaml, zt_doc_t **doc_p,
                 zt_diag_t *diag)
{
    zt_doc_t *self = s_doc_new(source);
    if (!self)
        return ZT_ENOMEM;
    int rc = ZT_OK;
    if (is_yaml)
        rc = s_yaml_parse(self, text, 1, diag);
    else {
        json_error_t err;
        self->root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
        if (!self->root) {
            zt_diag_add(diag, true, source, err.line, err.column, NULL, NULL,
                        "malformed JSON: %s", err.text);
            rc = ZT_ESPEC;
        }
        else
            s_yaml_parse(self, text, 0, diag); /* positions only; best effort */
    }
    if (rc == ZT_OK && !json_is_object(self->root)) {
        zt_diag_add(diag, true, source, 1, 1, NULL, NULL,
                    "the document must be an object (a mapping of field names to values)");
        rc = ZT_ESPEC;
    }
    if (rc != ZT_OK)
        zt_doc_destroy(&self);
    *doc_p = self;
    return rc;
}

int zt_doc_load(const char *path, zt_doc_t **doc_p, zt_diag_t *diag)
{
    *doc_p = NULL;
    char *text = zt_read_file(path, NULL);
    if (!text) {
        zt_diag_add(diag, true, path, 0, 0, NULL, NULL, "cannot read the file: %s", strerror(errno));
        return ZT_ENOTFOUND;
    }
    const char *dot = strrchr(path, '.');
    int is_yaml = dot && (!strcasecmp(dot, ".yaml") || !strcasecmp(dot, ".yml"));
    int rc = zt_doc_parse(path, text, is_yaml, doc_p, diag);
    free(text);
    return rc;
}

void zt_doc_set_origin(zt_doc_t *self, const char *path, const char *flag)
{
    json_object_set_new(self->origins, path, json_string(flag));
}

void zt_doc_report(zt_doc_t *self, zt_diag_t *diag, int is_error, const char *path,
                   const json_t *value, const char *fmt, ...)
{
    char rule[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rule, sizeof rule, fmt, ap);
    va_end(ap);
    char *vtext = value ? json_dumps(value, JSON_ENCODE_ANY) : NULL;
    if (vtext && strlen(vtext) > 120)
        strcpy(vtext + 110, "...");
    /* The value's own origin, or that of the nearest enclosing field. */
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    const char *flag = NULL;
    json_t *pos = NULL;
    for (;;) {
        if (!flag)
            flag = json_string_value(json_object_get(self->origins, p));
        if (!pos)
            pos = json_object_get(self->positions, p);
        if (flag || !*p)
            break;
        char *cut = strrchr(p, '.');
        char *br = strrchr(p, '[');
        if (br && (!cut || br > cut))
            cut = br;
        if (!cut)
            p[0] = 0;
        else
            *cut = 0;
    }
    if (flag) {
        char src[256];
        snprintf(src, sizeof src, "command line (%s)", flag);
        zt_diag_add(diag, is_error, src, 0, 0, path, vtext, "%s", rule);
    }
    else
        zt_diag_add(diag, is_error, self->source, (int) json_integer_value(json_array_get(pos, 0)),
                    (int) json_integer_value(json_array_get(pos, 1)), path, vtext, "%s", rule);
    free(vtext);
}

/* Levenshtein distance, case-insensitive (field names are short). */
static size_t s_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t) -1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char) a[i - 1]) != tolower((unsigned char) b[j - 1]);
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *zt_doc_nearest(const char *name, const char *const *known)
{
    const char *best = NULL;
    size_t best_d = (size_t) -1, len = strlen(name);
    for (int i = 0; known[i]; i++) {
        size_t d = s_distance(name, known[i]);
        /* a prefix of a known name ("replicaCont") is a typo of it too */
        if (len >= 4 && !strncasecmp(known[i], name, len))
            d = d < 1 ? d : 1;
        if (d < best_d) {
            best_d = d;
            best = known[i];
        }
    }
    size_t limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    return best && best_d <= limit ? best : NULL;
}

void zt_doc_check_unknown(zt_doc_t *self, zt_diag_t *diag, json_t *obj, const char *path,
                          const char *const *known, bool allow)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool ok = false;
        for (int i = 0; known[i] && !ok; i++)
            ok = !strcmp(key, known[i]);
        if (ok)
            continue;
        char *p = zt_strdupf("%s%s%s", path, *path ? "." : "", key);
        const char *near = zt_doc_nearest(key, known);
        char names[1024] = "";
        for (int i = 0; known[i]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", known[i]);
        if (allow)
            zt_doc_report(self, diag, 0, p, NULL, "unknown field, ignored (--allow-unknown-fields)");
        else if (near)
            zt_doc_report(self, diag, 1, p, NULL, "unknown field; did you mean \"%s\"? "
                          "(--allow-unknown-fields ignores fields of a newer service)", near);
        else
            zt_doc_report(self, diag, 1, p, NULL, "unknown field (known here: %s; --allow-unknown-fields "
                          "ignores fields of a newer service)", names);
        free(p);
    }
}
