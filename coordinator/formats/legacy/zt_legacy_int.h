/* zt_legacy_int: what the legacy AI Platform format's files share: its
 * trainingInput parser (zt_spec_legacy.c) and its tuning config
 * (zt_study_legacy.c). Private to formats/legacy/. */
#ifndef ZT_LEGACY_INT_H
#define ZT_LEGACY_INT_H
#include "plan/zt_spec_int.h"
#include "plan/zt_doc.h"
#include <jansson.h>
#include <stdbool.h>

/* A legacy trainingInput config with a hyperparameters block (root has
 * trainingInput.hyperparameters and no studySpec), and that block as the
 * Vertex study document the runner reads (a new reference; problems
 * reported at the legacy fields; allow: unknown fields warn). */
bool zt_study_is_legacy(json_t *root);
json_t *zt_study_from_legacy(zt_doc_t *doc, zt_diag_t *diag, bool allow);

#endif
