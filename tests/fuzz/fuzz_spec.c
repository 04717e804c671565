/* libFuzzer target: any text as a job spec, JSON and YAML. Validation must
 * report errors, never crash, hang or leak. */
#include "plan/zt_diag.h"
#include "plan/zt_doc.h"
#include "formats/zt_format.h"
#include "ztrain/zt_log.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[2][64];
    if (!path[0][0]) {
        zt_log_set_level(ZT_LOG_ERROR);
        snprintf(path[0], sizeof path[0], "/tmp/zt-fuzz-%d.json", (int) getpid());
        snprintf(path[1], sizeof path[1], "/tmp/zt-fuzz-%d.yaml", (int) getpid());
    }
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(path[k], "wb");
        if (!f)
            return 0;
        fwrite(data, 1, size, f);
        fclose(f);
        zt_diag_t *diag = zt_diag_new();
        json_t *flags = json_array();
        zt_plan_opts_t o = { path[k], flags, NULL, 0, NULL, NULL };
        zt_plan_t *plan = NULL;
        zt_format_load(&o, &plan, diag);
        zt_plan_destroy(&plan);
        json_decref(flags);
        zt_diag_destroy(&diag);
    }
    return 0;
}
