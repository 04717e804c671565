/* float16 and bfloat16 <-> float32, round to nearest even. */
#include "ztrain/zt_allreduce.h"
#include <string.h>

float zt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t) (h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0)
            bits = sign;
        else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | (uint32_t) (112 - e) << 23 | (man & 0x3ff) << 13;
        }
    }
    else if (exp == 31)
        bits = sign | 0x7f800000 | man << 13;
    else
        bits = sign | (exp + 112) << 23 | man << 13;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t zt_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t) ((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) /* inf, nan */
        return (uint16_t) (sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t) (sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10)
            return (uint16_t) sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t) (14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t) (sign | half);
    }
    uint32_t h = sign | (uint32_t) exp << 10 | man >> 13, rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return (uint16_t) h;
}

float zt_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t) h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t zt_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t) ((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t) (x >> 16);
}
