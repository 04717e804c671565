/* A man in the middle of a job's bulk connection, for the security tests:
 * a worker is pointed at this relay instead of its server (its reducer or
 * parameter server), and the relay forwards the worker's messages to the
 * server and the server's back, tampering with some on the way. It holds
 * no key of the job's (the tests run it as another local user).
 *
 *   zt_relay PORT UP_FLIPS UP_REPLAYS DOWN_FLIPS [OPEN_REPLAYS]
 *
 * listens on 127.0.0.1:PORT; reads the server's host:port from its
 * standard input (a line), then forwards both ways until its input ends.
 * Only sealed messages with a payload are tampered with ([header][seal]
 * [payload], the seal frame 24 bytes a payload): the first UP_FLIPS of
 * the worker's get one bit of their payload flipped, the next UP_REPLAYS
 * are forwarded twice (a replay), and the first DOWN_FLIPS of the server's
 * get one bit flipped. With OPEN_REPLAYS 1 it also keeps the worker's
 * stream opening (SEAL_OPEN) and, after 20 of the worker's sealed
 * messages, sends it to the server again twice: on the worker's own
 * connection, and from a connection of the relay's own ("beside"). At the
 * end it prints what it forwarded and did. */
#include "wire/zt_msg.h"
#include "ztrain/zt_error.h"
#include <czmq.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PARTS 12
#define MAX_CLIENTS 8

typedef struct {
    zmq_msg_t id;
    void *back; /* DEALER to the server */
} s_client_t;

/* Sends parts [from, n) (copies, so they can be sent again), after prefix. */
static void s_send(void *sock, zmq_msg_t *prefix, zmq_msg_t *parts, int from, int n)
{
    if (prefix) {
        zmq_msg_t c;
        zmq_msg_init(&c);
        zmq_msg_copy(&c, prefix);
        zmq_msg_send(&c, sock, ZMQ_SNDMORE);
    }
    for (int i = from; i < n; i++) {
        zmq_msg_t c;
        zmq_msg_init_size(&c, zmq_msg_size(&parts[i]));
        memcpy(zmq_msg_data(&c), zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i]));
        zmq_msg_send(&c, sock, i + 1 < n ? ZMQ_SNDMORE : 0);
    }
}

/* Whether parts [from, n) are a sealed message with a payload. */
static bool s_sealed(zmq_msg_t *parts, int from, int n)
{
    int payloads = n - from - 2;
    return payloads >= 1 && zmq_msg_size(&parts[from + 1]) == (size_t) payloads * 24 &&
           zmq_msg_size(&parts[n - 1]) >= 16;
}

/* The worker's opening, kept, and sent again once (on its connection,
 * then beside it) after 20 of its sealed messages. */
typedef struct {
    bool want, have, done;
    zmq_msg_t open;
    int sealed;  /* the worker's sealed messages since */
    void *beside; /* the relay's own connection to the server */
    int answers;  /* what came back to it */
} s_opening_t;

static void s_opening_up(s_opening_t *o, void *back, const char *target, zmq_msg_t *parts, int n)
{
    zt_msg_t m;
    if (!o->want || o->done)
        return;
    if (!o->have && n == 2 && zt_msg_decode(zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), &m, NULL) == ZT_OK &&
        m.type == ZT_MSG_SEAL_OPEN) {
        zmq_msg_init(&o->open);
        zmq_msg_copy(&o->open, &parts[1]);
        o->have = true;
    }
    if (!o->have || !s_sealed(parts, 1, n) || ++o->sealed < 20)
        return;
    s_send(back, NULL, &o->open, 0, 1); /* on the worker's own connection */
    o->beside = zmq_socket(zsys_init(), ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(o->beside, ZMQ_LINGER, &zero, sizeof zero);
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s", target);
    zmq_connect(o->beside, ep);
    s_send(o->beside, NULL, &o->open, 0, 1);
    o->done = true;
}

static void s_flip(zmq_msg_t *m)
{
    ((unsigned char *) zmq_msg_data(m))[zmq_msg_size(m) / 2] ^= 0x08;
}

/* Long on purpose: the arguments, the wait for the server's address, and
 * the forwarding loop with its three kinds of tampering in one place. */
int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: zt_relay PORT UP_FLIPS UP_REPLAYS DOWN_FLIPS [OPEN_REPLAYS] (the server's host:port "
                "on stdin)\n");
        return 2;
    }
    s_opening_t opening = { .want = argc == 6 && atoi(argv[5]) > 0 };
    int up_flips = atoi(argv[2]), up_replays = atoi(argv[3]), down_flips = atoi(argv[4]);
    zsock_t *front = zsock_new(ZMQ_ROUTER);
    zsock_set_linger(front, 0);
    if (!front || zsock_bind(front, "tcp://127.0.0.1:%s", argv[1]) < 0) {
        fprintf(stderr, "zt_relay: cannot listen on 127.0.0.1:%s\n", argv[1]);
        return 2;
    }
    printf("relay: listening on 127.0.0.1:%s\n", argv[1]);
    fflush(stdout);
    char target[256];
    if (!fgets(target, sizeof target, stdin)) {
        fprintf(stderr, "zt_relay: no server address on stdin\n");
        return 2;
    }
    target[strcspn(target, "\r\n")] = 0;
    s_client_t clients[MAX_CLIENTS];
    int nclients = 0, flipped_up = 0, replayed = 0, flipped_down = 0;
    long up = 0, down = 0;
    bool eof = false;
    while (!eof) {
        zmq_pollitem_t items[2 + MAX_CLIENTS] = { { zsock_resolve(front), 0, ZMQ_POLLIN, 0 },
                                                  { NULL, 0, ZMQ_POLLIN, 0 } };
        for (int c = 0; c < nclients; c++)
            items[2 + c] = (zmq_pollitem_t) { clients[c].back, 0, ZMQ_POLLIN, 0 };
        if (opening.beside)
            while (zmq_recv(opening.beside, (char[64]) { 0 }, 64, ZMQ_DONTWAIT) >= 0)
                opening.answers++; /* (each frame of an answer) */
        if (zmq_poll(items, 2 + nclients, 100) < 0)
            break;
        if (items[1].revents & (ZMQ_POLLIN | ZMQ_POLLERR)) { /* stdin: its end (a hang-up) ends the relay */
            char buf[256];
            if (read(0, buf, sizeof buf) <= 0)
                eof = true;
        }
        zmq_msg_t parts[MAX_PARTS];
        int n;
        while ((items[0].revents & ZMQ_POLLIN) &&
               (n = zt_msg_recv_parts(zsock_resolve(front), parts, MAX_PARTS)) > 0) {
            int c = 0;
            while (c < nclients && !(zmq_msg_size(&clients[c].id) == zmq_msg_size(&parts[0]) &&
                                     !memcmp(zmq_msg_data(&clients[c].id), zmq_msg_data(&parts[0]),
                                             zmq_msg_size(&parts[0]))))
                c++;
            if (c == nclients && nclients < MAX_CLIENTS) { /* a new connection: one of ours to the server */
                void *back = zmq_socket(zsys_init(), ZMQ_DEALER);
                int zero = 0;
                zmq_setsockopt(back, ZMQ_LINGER, &zero, sizeof zero);
                char ep[300];
                snprintf(ep, sizeof ep, "tcp://%s", target);
                zmq_connect(back, ep);
                zmq_msg_init(&clients[c].id);
                zmq_msg_copy(&clients[c].id, &parts[0]);
                clients[c].back = back;
                nclients++;
            }
            if (c < nclients) {
                up++;
                s_opening_up(&opening, clients[c].back, target, parts, n);
                bool sealed = s_sealed(parts, 1, n);
                if (sealed && flipped_up < up_flips) {
                    s_flip(&parts[n - 1]);
                    flipped_up++;
                    s_send(clients[c].back, NULL, parts, 1, n);
                }
                else {
                    s_send(clients[c].back, NULL, parts, 1, n);
                    if (sealed && replayed < up_replays) {
                        s_send(clients[c].back, NULL, parts, 1, n); /* the very same frames again */
                        replayed++;
                    }
                }
            }
            zt_msg_close_parts(parts, n);
        }
        for (int c = 0; c < nclients; c++)
            while ((items[2 + c].revents & ZMQ_POLLIN) &&
                   (n = zt_msg_recv_parts(clients[c].back, parts, MAX_PARTS)) > 0) {
                down++;
                if (s_sealed(parts, 0, n) && flipped_down < down_flips) {
                    s_flip(&parts[n - 1]);
                    flipped_down++;
                }
                s_send(zsock_resolve(front), &clients[c].id, parts, 0, n);
                zt_msg_close_parts(parts, n);
            }
    }
    printf("relay: forwarded %ld up, %ld down; flipped %d up, replayed %d up, flipped %d down\n", up, down,
           flipped_up, replayed, flipped_down);
    if (opening.want)
        printf("relay: opening replayed %d times, %d frames answered beside\n", opening.done ? 2 : 0,
               opening.answers);
    if (opening.have)
        zmq_msg_close(&opening.open);
    if (opening.beside)
        zmq_close(opening.beside);
    for (int c = 0; c < nclients; c++) {
        zmq_close(clients[c].back);
        zmq_msg_close(&clients[c].id);
    }
    zsock_destroy(&front);
    return 0;
}
