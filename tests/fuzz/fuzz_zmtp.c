/* libFuzzer target: the ZMTP wire as a server's own port reads it (a
 * parameter server's, or a reducer's with ZT_BULK_DIRECT=all: zt_zmtp_accept
 * on a connection the guard let in). The fuzzer's bytes are everything the
 * client sends: its greeting, its READY, then frames of any flags and
 * length, small (copied out of the end's buffer) and large (read straight
 * into a frame of their own), cut off anywhere. Under a frame limit the
 * first byte picks, every message handed on must have at most the parts
 * asked for, none longer than the limit; nothing may crash or leak.
 *   make fuzz   (clang), then build-fuzz/bin/fuzz_zmtp -max_total_time=600
 * Input: one byte for the limit, then the client's bytes. */
#include "wire/zt_zmtp.h"
#include "ztrain/zt_log.h"
#include <assert.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#define MAX_PARTS 4

static const int64_t s_limits[] = { 0, 512, 8192, 8193, 20000, 1 << 20 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        zt_log_init("fuzz_zmtp", 0);
        zt_log_set_level(ZT_LOG_ERROR);
        ready = true;
    }
    if (size < 1)
        return 0;
    int64_t limit = s_limits[data[0] % (sizeof s_limits / sizeof *s_limits)];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    /* the client's bytes wait in the socket (the input is at most what
     * its buffer holds), then the client is gone */
    size_t off = 1;
    while (off < size) {
        ssize_t w = send(sv[1], data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0)
            break;
        off += (size_t) w;
    }
    shutdown(sv[1], SHUT_WR);
    zt_zmtp_t *z = zt_zmtp_accept(sv[0], "127.0.0.1:1"); /* takes sv[0] */
    if (z) {
        zt_zmtp_set_limit(z, limit);
        for (int turns = 0; turns < 100000 && (zt_zmtp_connected(z) || zt_zmtp_waiting(z)); turns++) {
            zmq_msg_t parts[MAX_PARTS];
            int n = zt_zmtp_recv(z, parts, MAX_PARTS);
            assert(n <= MAX_PARTS);
            for (int i = 0; i < n; i++) {
                assert((int64_t) zmq_msg_size(&parts[i]) <= limit);
                zmq_msg_close(&parts[i]);
            }
        }
        zt_zmtp_destroy(&z);
    }
    close(sv[1]);
    return 0;
}
