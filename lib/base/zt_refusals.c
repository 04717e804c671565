#include "base/zt_refusals.h"
#include "ztrain/zt_log.h"

bool zt_refusals_log_due(const zt_refusals_t *r, int64_t now_ms)
{
    return !r->logged_ms || now_ms - r->logged_ms >= ZT_REFUSALS_LOG_MS;
}

void zt_refusals_count(zt_refusals_t *r, const char *what, int64_t now_ms)
{
    r->total++;
    r->unlogged++;
    if (zt_refusals_log_due(r, now_ms)) {
        zt_warn("refused %s (%lld such since the last line, %lld in all)", what, (long long) r->unlogged,
                (long long) r->total);
        r->unlogged = 0;
        r->logged_ms = now_ms;
    }
}

bool zt_refusals_due(zt_refusals_t *r, int64_t now_ms, int64_t *total)
{
    if (r->total == r->reported || (r->reported_ms && now_ms - r->reported_ms < ZT_REFUSALS_REPORT_MS))
        return false;
    r->reported = r->total;
    r->reported_ms = now_ms;
    *total = r->total;
    return true;
}
