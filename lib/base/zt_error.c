#include "ztrain/zt_error.h"
#include <stddef.h>

const char *zt_strerror(int err)
{
    switch (err) {
#define ZT_X_(name, code, text) case code: return text;
    ZT_ERRORS(ZT_X_)
#undef ZT_X_
    default: return "unknown error";
    }
}

const char *zt_error_name(int err)
{
    switch (err) {
#define ZT_X_(name, code, text) case code: return #name;
    ZT_ERRORS(ZT_X_)
#undef ZT_X_
    default: return NULL;
    }
}

static volatile int s_retryable;

void zt_fail_retryable(void)
{
    __atomic_store_n(&s_retryable, 1, __ATOMIC_RELAXED);
}

int zt_exit_status(int status)
{
    return status != 0 && __atomic_load_n(&s_retryable, __ATOMIC_RELAXED) ? ZT_EXIT_RETRY : status;
}
