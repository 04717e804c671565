#include "base/zt_shard.h"
#include <assert.h>
#include <stdlib.h>

void zt_shard_range(int64_t total, int servers, int s, int64_t *lo, int64_t *hi)
{
    int64_t per = (total + servers - 1) / servers;
    per = (per + 15) / 16 * 16;
    int64_t a = (int64_t) s * per, b = a + per;
    *lo = a < total ? a : total;
    *hi = b < total ? b : total;
}

int zt_shard_owner(int64_t total, int servers, int64_t at)
{
    int64_t per = (total + servers - 1) / servers;
    per = (per + 15) / 16 * 16;
    int s = per ? (int) (at / per) : 0;
    return s < servers ? s : servers - 1;
}

static uint64_t s_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

float zt_init_uniform(uint64_t seed, int64_t i, float scale)
{
    uint64_t r = s_mix(seed * 0x100000001b3ull ^ s_mix((uint64_t) i));
    double u = (double) (r >> 11) / 9007199254740992.0; /* [0, 1) */
    return (float) ((2.0 * u - 1.0) * scale);
}

void zt_shard_selftest(void)
{
    const int64_t totals[] = { 0, 1, 15, 16, 17, 1000, 203530, 1 << 20 };
    for (size_t t = 0; t < sizeof totals / sizeof *totals; t++)
        for (int servers = 1; servers <= 4; servers++) {
            int64_t total = totals[t];
            char *seen = calloc((size_t) total + 1, 1);
            int64_t expect_lo = 0;
            for (int s = 0; s < servers; s++) {
                int64_t lo, hi;
                zt_shard_range(total, servers, s, &lo, &hi);
                assert(lo == expect_lo && lo <= hi);
                expect_lo = hi;
                for (int64_t i = lo; i < hi; i++) {
                    assert(!seen[i]);
                    seen[i] = 1;
                    assert(zt_shard_owner(total, servers, i) == s);
                }
                if (total >= 64 * servers) { /* balanced: within one 16-element block */
                    assert(hi - lo <= (total + servers - 1) / servers + 16);
                    assert(lo % 16 == 0);
                }
            }
            assert(expect_lo == total);
            for (int64_t i = 0; i < total; i++)
                assert(seen[i]);
            free(seen);
        }
    float a = zt_init_uniform(7, 123, 0.5f), b = zt_init_uniform(7, 123, 0.5f);
    assert(a == b && a >= -0.5f && a <= 0.5f);
    assert(zt_init_uniform(8, 123, 0.5f) != a);
}
