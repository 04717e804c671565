#include "ztrain/zt_error.h"

const char *zt_strerror(int err)
{
    switch (err) {
#define ZT_X_(name, code, text) case code: return text;
    ZT_ERRORS(ZT_X_)
#undef ZT_X_
    default: return "unknown error";
    }
}
