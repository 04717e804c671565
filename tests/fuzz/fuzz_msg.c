/* libFuzzer target: any bytes into the control/data-plane decoder. It must
 * return an error or a message, never crash, hang or leak.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_msg -max_total_time=60 */
#include "wire/zt_msg.h"
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zt_msg_t m;
    zt_msg_drops_t drops = { 0 };
    if (zt_msg_decode(data, size, &m, &drops) == 0) {
        zframe_t *f = zt_msg_encode(&m); /* what decodes re-encodes */
        zframe_destroy(&f);
    }
    return 0;
}
