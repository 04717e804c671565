#include "wire/zt_msg.h"
#include "ztrain/zt_error.h"
#include "base/zt_text.h"
#include <assert.h>
#include <msgpack.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "ztrain/zt_knobs.h"

static size_t s_be(const uint8_t *p, int k);

typedef struct {
    const char *name;   /* field name */
    char kind;          /* 'I', 'D' or 'S' */
    size_t offset;      /* in the body struct */
} s_field_t;

#define ZT_F_DESC_(T, kind, n) { #n, #kind[0], offsetof(T, n) },
#define ZT_X_(T, id, name) \
    static const s_field_t s_fields_##T[] = { ZT_MSG_##T(ZT_F_DESC_, zt_msg_##T##_t) };
ZT_MSG_LIST(ZT_X_)
#undef ZT_X_

typedef struct {
    const char *name;           /* message name */
    const s_field_t *fields;    /* its fields in wire order */
    size_t nfields;
} s_type_t;

static const s_type_t s_types[ZT_MSG_LIMIT_] = {
#define ZT_X_(T, id, nm) [id] = { nm, s_fields_##T, sizeof s_fields_##T / sizeof(s_field_t) },
    ZT_MSG_LIST(ZT_X_)
#undef ZT_X_
};

const char *zt_msg_type_name(int type)
{
    return type > 0 && type < ZT_MSG_LIMIT_ && s_types[type].name ? s_types[type].name : "unknown";
}

void zt_msg_set_str(char *field, const char *s)
{
    snprintf(field, ZT_MSG_STR_MAX, "%s", s ? s : "");
}

zframe_t *zt_msg_encode(const zt_msg_t *msg)
{
    if (msg->type <= 0 || msg->type >= ZT_MSG_LIMIT_ || !s_types[msg->type].name)
        return NULL;
    const s_type_t *t = &s_types[msg->type];
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 8);
    msgpack_pack_uint16(&pk, ZT_MSG_MAGIC);
    msgpack_pack_uint8(&pk, ZT_PROTO_MAJOR);
    msgpack_pack_uint8(&pk, (uint8_t) msg->type);
    msgpack_pack_int(&pk, msg->pool);
    msgpack_pack_int(&pk, msg->index);
    msgpack_pack_int64(&pk, msg->incarnation);
    msgpack_pack_uint64(&pk, msg->seq);
    msgpack_pack_array(&pk, (uint32_t) t->nfields);
    const char *body = (const char *) &msg->u;
    for (size_t i = 0; i < t->nfields; i++) {
        const char *at = body + t->fields[i].offset;
        if (t->fields[i].kind == 'I')
            msgpack_pack_int64(&pk, *(const int64_t *) at);
        else if (t->fields[i].kind == 'D')
            msgpack_pack_double(&pk, *(const double *) at);
        else {
            size_t n = strnlen(at, ZT_MSG_STR_MAX);
            msgpack_pack_str(&pk, n);
            msgpack_pack_str_body(&pk, at, n);
        }
    }
    zframe_t *frame = buf.size <= ZT_MSG_MAX_BYTES ? zframe_new(buf.data, buf.size) : NULL;
    msgpack_sbuffer_destroy(&buf);
    return frame;
}

static bool s_as_int(const msgpack_object *o, int64_t *out)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > INT64_MAX)
            return false;
        *out = (int64_t) o->via.u64;
        return true;
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return true;
    }
    return false;
}

/* Bytes taken by one msgpack object at p, or -1. Every declared length and
 * element count must fit in what remains (an element takes at least one
 * byte), and nesting is shallow, so the unpacker is never asked to allocate
 * for elements that are not there: msgpack-c would otherwise allocate 2^32
 * slots for a 5-byte frame. */
static long s_scan(const uint8_t *p, size_t n, int depth)
{
    if (n < 1 || depth > 8)
        return -1;
    uint8_t b = p[0];
    size_t head = 1, len = 0, count = 0;
#define NEED(k) do { if (n < (k)) return -1; } while (0)
#define BE(off, k) s_be(p + (off), (k))
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
        return 1;
    if ((b & 0xf0) == 0x80) count = 2u * (b & 0x0f);
    else if ((b & 0xf0) == 0x90) count = b & 0x0f;
    else if ((b & 0xe0) == 0xa0) len = b & 0x1f;
    else switch (b) {
        case 0xc4: case 0xd9: NEED(2); head = 2; len = BE(1, 1); break;
        case 0xc5: case 0xda: NEED(3); head = 3; len = BE(1, 2); break;
        case 0xc6: case 0xdb: NEED(5); head = 5; len = BE(1, 4); break;
        case 0xc7: NEED(3); head = 3; len = BE(1, 1); break;
        case 0xc8: NEED(4); head = 4; len = BE(1, 2); break;
        case 0xc9: NEED(6); head = 6; len = BE(1, 4); break;
        case 0xca: len = 4; break;
        case 0xcb: len = 8; break;
        case 0xcc: case 0xd0: len = 1; break;
        case 0xcd: case 0xd1: len = 2; break;
        case 0xce: case 0xd2: len = 4; break;
        case 0xcf: case 0xd3: len = 8; break;
        case 0xd4: len = 2; break;
        case 0xd5: len = 3; break;
        case 0xd6: len = 5; break;
        case 0xd7: len = 9; break;
        case 0xd8: len = 17; break;
        case 0xdc: NEED(3); head = 3; count = BE(1, 2); break;
        case 0xdd: NEED(5); head = 5; count = BE(1, 4); break;
        case 0xde: NEED(3); head = 3; count = 2 * BE(1, 2); break;
        case 0xdf: NEED(5); head = 5; count = 2 * BE(1, 4); break;
        default: return -1; /* 0xc1 is never used */
    }
    if (len > n - head)
        return -1;
    size_t at = head + len;
    if (count > n - at)
        return -1;
    for (size_t i = 0; i < count; i++) {
        long k = s_scan(p + at, n - at, depth + 1);
        if (k < 0)
            return -1;
        at += (size_t) k;
    }
    return (long) at;
#undef NEED
#undef BE
}

static size_t s_be(const uint8_t *p, int k)
{
    size_t v = 0;
    for (int i = 0; i < k; i++)
        v = (v << 8) | p[i];
    return v;
}

#define DROP(field, code) do { if (drops) drops->field++; rc = (code); goto out; } while (0)

int zt_msg_decode(const void *data, size_t size, zt_msg_t *msg, zt_msg_drops_t *drops)
{
    int rc = ZT_OK;
    memset(msg, 0, sizeof *msg);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (!data || size == 0)
        DROP(malformed, ZT_EPROTO);
    if (size > ZT_MSG_MAX_BYTES)
        DROP(too_long, ZT_EPROTO);
    if (s_scan(data, size, 0) != (long) size)
        DROP(malformed, ZT_EPROTO);
    if (msgpack_unpack_next(&up, data, size, &off) != MSGPACK_UNPACK_SUCCESS || off != size)
        DROP(malformed, ZT_EPROTO);
    const msgpack_object *root = &up.data;
    if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size != 8)
        DROP(malformed, ZT_EPROTO);
    const msgpack_object *h = root->via.array.ptr;
    int64_t magic, major, type, pool, index, inc, seq;
    if (!s_as_int(&h[0], &magic) || magic != ZT_MSG_MAGIC)
        DROP(bad_magic, ZT_EPROTO);
    if (!s_as_int(&h[1], &major))
        DROP(malformed, ZT_EPROTO);
    if (major != ZT_PROTO_MAJOR)
        DROP(bad_version, ZT_EVERSION);
    if (!s_as_int(&h[2], &type))
        DROP(malformed, ZT_EPROTO);
    if (type <= 0 || type >= ZT_MSG_LIMIT_ || !s_types[type].name)
        DROP(unknown_type, ZT_EPROTO);
    if (!s_as_int(&h[3], &pool) || pool < 0 || pool > 3 || !s_as_int(&h[4], &index) ||
        index < 0 || index > 1000000 || !s_as_int(&h[5], &inc) || inc < 0 ||
        h[6].type != MSGPACK_OBJECT_POSITIVE_INTEGER || h[7].type != MSGPACK_OBJECT_ARRAY)
        DROP(malformed, ZT_EPROTO);
    (void) seq;
    const s_type_t *t = &s_types[type];
    if (h[7].via.array.size != t->nfields)
        DROP(malformed, ZT_EPROTO);
    msg->type = (zt_msg_type_t) type;
    msg->pool = (int) pool;
    msg->index = (int) index;
    msg->incarnation = inc;
    msg->seq = h[6].via.u64;
    char *body = (char *) &msg->u;
    for (size_t i = 0; i < t->nfields; i++) {
        const msgpack_object *f = &h[7].via.array.ptr[i];
        char *at = body + t->fields[i].offset;
        if (t->fields[i].kind == 'I') {
            if (!s_as_int(f, (int64_t *) at))
                DROP(malformed, ZT_EPROTO);
        }
        else if (t->fields[i].kind == 'D') {
            if (f->type == MSGPACK_OBJECT_FLOAT64 || f->type == MSGPACK_OBJECT_FLOAT32)
                *(double *) at = f->via.f64;
            else {
                int64_t n;
                if (!s_as_int(f, &n))
                    DROP(malformed, ZT_EPROTO);
                *(double *) at = (double) n;
            }
        }
        else {
            if (f->type != MSGPACK_OBJECT_STR)
                DROP(malformed, ZT_EPROTO);
            if (f->via.str.size >= ZT_MSG_STR_MAX)
                DROP(too_long, ZT_EPROTO);
            if (memchr(f->via.str.ptr, 0, f->via.str.size) || !zt_utf8_valid(f->via.str.ptr, f->via.str.size))
                DROP(malformed, ZT_EPROTO); /* every string field is UTF-8 text, whatever its type */
            memcpy(at, f->via.str.ptr, f->via.str.size);
            at[f->via.str.size] = 0;
        }
    }
out:
    msgpack_unpacked_destroy(&up);
    if (rc != ZT_OK)
        memset(msg, 0, sizeof *msg);
    return rc;
}

int zt_msg_send(zsock_t *sock, zframe_t *identity, const zt_msg_t *msg)
{
    zframe_t *frame = zt_msg_encode(msg);
    if (!frame)
        return ZT_EINVAL;
    if (identity) {
        zframe_t *id = zframe_dup(identity);
        if (zframe_send(&id, sock, ZFRAME_MORE | ZFRAME_DONTWAIT) < 0) {
            zframe_destroy(&id);
            zframe_destroy(&frame);
            return ZT_EIO;
        }
    }
    if (zframe_send(&frame, sock, ZFRAME_DONTWAIT) < 0) {
        zframe_destroy(&frame);
        return ZT_EIO;
    }
    return ZT_OK;
}

int zt_msg_recv_parts(void *socket, zmq_msg_t *parts, int max)
{
    int n = 0;
    for (;;) {
        zmq_msg_t extra, *m = n < max ? &parts[n] : &extra;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, socket, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(m);
            return n;
        }
        int more = zmq_msg_more(m);
        if (n < max)
            n++;
        else
            zmq_msg_close(m);
        if (!more)
            return n;
    }
}

int zt_msg_send_routed(void *router, zmq_msg_t *identity, const zt_msg_t *msg, zmq_msg_t *payload,
                       int npayload)
{
    zframe_t *h = zt_msg_encode(msg);
    int rc = ZT_OK;
    zmq_msg_t id, hm;
    if (!h)
        rc = ZT_EINVAL;
    else {
        zmq_msg_init(&id);
        zmq_msg_copy(&id, identity);
        zmq_msg_init_size(&hm, zframe_size(h));
        memcpy(zmq_msg_data(&hm), zframe_data(h), zframe_size(h));
        zframe_destroy(&h);
        if (zmq_msg_send(&id, router, ZMQ_SNDMORE) < 0 ||
            zmq_msg_send(&hm, router, npayload ? ZMQ_SNDMORE : 0) < 0)
            rc = ZT_EIO;
    }
    for (int i = 0; i < npayload; i++)
        if (rc != ZT_OK || zmq_msg_send(&payload[i], router, i + 1 < npayload ? ZMQ_SNDMORE : 0) < 0)
            zmq_msg_close(&payload[i]);
    return rc;
}

void zt_msg_close_parts(zmq_msg_t *parts, int n)
{
    for (int i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
}

/* ------------------------------------------------------------- selftest */

#define ZT_X_(T, id, name) + 1
static const int s_declared_types = 0 ZT_MSG_LIST(ZT_X_);
#undef ZT_X_

static void s_fill(zt_msg_t *m, int type, int salt)
{
    memset(m, 0, sizeof *m);
    m->type = (zt_msg_type_t) type;
    m->pool = salt % 4;
    m->index = salt * 7;
    m->incarnation = salt;
    m->seq = (uint64_t) salt * 1000003u;
    const s_type_t *t = &s_types[type];
    char *body = (char *) &m->u;
    for (size_t i = 0; i < t->nfields; i++) {
        char *at = body + t->fields[i].offset;
        if (t->fields[i].kind == 'I')
            *(int64_t *) at = -((int64_t) salt << 33) + (int64_t) i;
        else if (t->fields[i].kind == 'D')
            *(double *) at = salt * 0.25 + (double) i;
        else
            snprintf(at, ZT_MSG_STR_MAX, "%s-%d-%zu", t->fields[i].name, salt, i);
    }
}

void zt_msg_selftest(void)
{
    zt_msg_t out_bad_;
    zt_msg_drops_t drops = { 0 };
    int declared = 0;
    for (int type = 1; type < ZT_MSG_LIMIT_; type++) {
        if (!s_types[type].name)
            continue;
        declared++;
        for (int salt = 0; salt < 3; salt++) {
            zt_msg_t a, b;
            s_fill(&a, type, salt);
            zframe_t *f = zt_msg_encode(&a);
            assert(f);
            assert(zt_msg_decode(zframe_data(f), zframe_size(f), &b, &drops) == ZT_OK);
            assert(memcmp(&a, &b, sizeof a) == 0);
            /* Every truncation is rejected, never a crash. */
            for (size_t cut = 0; cut < zframe_size(f); cut++)
                assert(zt_msg_decode(zframe_data(f), cut, &b, &drops) != ZT_OK);
            /* Every single-byte corruption decodes or is rejected cleanly. */
            for (size_t i = 0; i < zframe_size(f); i++) {
                byte *d = zframe_data(f);
                byte saved = d[i];
                d[i] ^= 0xA5;
                (void) zt_msg_decode(d, zframe_size(f), &b, &drops);
                d[i] = saved;
            }
            zframe_destroy(&f);
        }
    }
    assert(declared == s_declared_types);
    /* A string field that is not UTF-8 is malformed, in any message type. */
    zt_msg_t bad;
    s_fill(&bad, ZT_MSG_METRIC, 0);
    zt_msg_set_str(bad.u.METRIC.name, "loss\xff");
    uint64_t malformed = drops.malformed;
    zframe_t *bf = zt_msg_encode(&bad);
    assert(bf && zt_msg_decode(zframe_data(bf), zframe_size(bf), &out_bad_, &drops) == ZT_EPROTO);
    assert(drops.malformed == malformed + 1);
    zframe_destroy(&bf);
    /* Wrong version, magic, type; strings too long; random garbage. */
    zt_msg_t m, out;
    s_fill(&m, ZT_MSG_HEARTBEAT, 1);
    zframe_t *f = zt_msg_encode(&m);
    byte *d = zframe_data(f);
    assert(d[0] == 0x98); /* fixarray of 8 */
    d[4] = ZT_PROTO_MAJOR + 1; /* [0x98, 0xcd, 0x5a, 0x54, major, ...] */
    assert(zt_msg_decode(d, zframe_size(f), &out, &drops) == ZT_EVERSION);
    assert(drops.bad_version == 1);
    d[4] = ZT_PROTO_MAJOR;
    d[2] = 0;
    assert(zt_msg_decode(d, zframe_size(f), &out, &drops) == ZT_EPROTO && drops.bad_magic >= 1);
    zframe_destroy(&f);
    m.type = (zt_msg_type_t) 99;
    assert(zt_msg_encode(&m) == NULL);
    unsigned seed = 12345;
    byte junk[512];
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t) (rand_r(&seed) % (int) sizeof junk);
        for (size_t k = 0; k < n; k++)
            junk[k] = (byte) rand_r(&seed);
        if (n > 0)
            junk[0] = 0x98;
        (void) zt_msg_decode(junk, n, &out, &drops);
    }
    assert(zt_msg_decode(junk, ZT_MSG_MAX_BYTES + 1, &out, &drops) == ZT_EPROTO);
    /* Declared sizes that are not there: rejected before any allocation. */
    const byte bomb_array[] = { 0xdd, 0xff, 0xff, 0xff, 0xff };
    const byte bomb_map[] = { 0x98, 0xdf, 0x7f, 0xff, 0xff, 0xff };
    const byte bomb_str[] = { 0xdb, 0xff, 0xff, 0xff, 0xf0, 'a' };
    assert(zt_msg_decode(bomb_array, sizeof bomb_array, &out, &drops) == ZT_EPROTO);
    assert(zt_msg_decode(bomb_map, sizeof bomb_map, &out, &drops) == ZT_EPROTO);
    assert(zt_msg_decode(bomb_str, sizeof bomb_str, &out, &drops) == ZT_EPROTO);
    assert(!strcmp(zt_msg_type_name(ZT_MSG_METRIC), "metric"));
    assert(!strcmp(zt_msg_type_name(0), "unknown"));
}
