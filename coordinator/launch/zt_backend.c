/* The launch backends there are, by name. A new backend is one more file
 * beside zt_backend_local.c and one more line here (and its name among
 * ZT_BACKEND's values in zt_knobs.h). */
#include "launch/zt_backend.h"
#include "ztrain/zt_knobs.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *zt_backend_names(void)
{
    return "local, slurm";
}

bool zt_backend_known(const char *name, char *err, size_t len)
{
    if (!strcmp(name, "local") || !strcmp(name, "slurm"))
        return true;
    snprintf(err, len, "unknown launch backend '%s' (this ztrain has: %s)", name, zt_backend_names());
    return false;
}

zt_backend_t *zt_backend_new(const char *name, char *err, size_t len)
{
    if (!name)
        name = zt_knob_str(ZT_KNOB_BACKEND);
    if (!zt_backend_known(name, err, len))
        return NULL;
    return !strcmp(name, "local") ? zt_backend_local_new() : zt_backend_slurm_new();
}
