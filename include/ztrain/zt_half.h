/* ztrain: float16 and bfloat16 conversions (round to nearest even), for
 * tensors all-reduced in half precision. */
#ifndef ZT_HALF_H
#define ZT_HALF_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

float zt_f16_to_f32(uint16_t h);
uint16_t zt_f32_to_f16(float f);
float zt_bf16_to_f32(uint16_t h);
uint16_t zt_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
