/* ZT_TEST_SEALED=1 for the C integration tests (ctest's *_sealed): keys
 * made as a job's in dir/keys, found by every process started after
 * (ZT_CREDENTIALS), and TCP only, so every bulk byte is sealed. */
#ifndef TEST_SEALED_H
#define TEST_SEALED_H
#include "wire/zt_auth.h"
#include "ztrain/zt_error.h"
#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether this run is sealed; if so, its keys are made. Call first. */
static bool test_sealed_setup(const char *dir)
{
    const char *on = getenv("ZT_TEST_SEALED");
    if (!on || strcmp(on, "1"))
        return false;
    char keys[300], *names[] = { "t" };
    snprintf(keys, sizeof keys, "%s/keys", dir);
    int rc = zt_auth_write_job(keys, names, 1);
    assert(rc == ZT_OK);
    (void) rc;
    snprintf(keys, sizeof keys, "%s/keys/t.key", dir);
    setenv("ZT_CREDENTIALS", keys, 1);
    setenv("ZT_DATA_IPC", "off", 1);
    return true;
}
#endif
