/* Sends malformed and wrong-version messages to a coordinator's control
 * plane (endpoint in argv[1]); the coordinator must count and drop them.
 * It connects through ztrain's transport: with ZT_CREDENTIALS (a replica's
 * keys) its garbage reaches a secured job's coordinator, as a broken
 * replica's would. */
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ctl_garbage ENDPOINT\n");
        return 2;
    }
    zsock_t *d = zt_sock_dealer(ZT_PLANE_CONTROL, argv[1]);
    if (!d)
        return 1;
    zsock_set_linger(d, 2000);
    zstr_send(d, "this is not msgpack");                  /* malformed */
    zstr_sendx(d, "two", "frames", NULL);                 /* wrong shape */
    zt_msg_t m = { .type = ZT_MSG_HEARTBEAT, .pool = 1, .index = 0 };
    zframe_t *f = zt_msg_encode(&m);
    byte *b = zframe_data(f);
    b[4] = ZT_PROTO_MAJOR + 7;                            /* another major version */
    zframe_send(&f, d, 0);
    m.pool = 3;
    m.index = 999;                                        /* no such replica */
    zt_msg_send(d, NULL, &m);
    unsigned seed = 7;
    for (int i = 0; i < 200; i++) {                       /* random bytes */
        byte junk[64];
        for (size_t k = 0; k < sizeof junk; k++)
            junk[k] = (byte) rand_r(&seed);
        zframe_t *j = zframe_new(junk, 1 + (size_t) (rand_r(&seed) % 63));
        zframe_send(&j, d, 0);
    }
    zclock_sleep(300);
    zsock_destroy(&d);
    return 0;
}
