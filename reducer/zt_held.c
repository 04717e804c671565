#include "zt_held.h"
#include "allreduce/zt_arlayout.h"
#include "base/zt_util.h"
#include "wire/zt_shm.h"
#include "ztrain/zt_allreduce.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_half.h"
#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct zt_held_piece_t {
    int64_t a, b;              /* elements [a, b) of the bucket */
    size_t skip;               /* element a's byte in msg's data */
    const char *shm;           /* element a in a peer's pinned mapping, or NULL */
    char *own;                 /* a copy of its own, or NULL */
    zmq_msg_t msg;             /* else a reference to the frame (the node never moves) */
    zt_held_piece_t *next;     /* on the spare list */
};

static const char *s_src(zt_held_piece_t *x)
{
    return x->own ? x->own : x->shm ? x->shm : (const char *) zmq_msg_data(&x->msg) + x->skip;
}

/* Lets go of what x holds; the node goes to h's spare list, for the next
 * piece (no allocation per piece once a round has run). */
static void s_let_go(zt_held_t *h, zt_held_piece_t *x)
{
    if (x->shm)
        zt_shm_peer_pin(x->shm, -1);
    else if (x->own)
        free(x->own);
    else
        zmq_msg_close(&x->msg);
    x->next = h->spare;
    h->spare = x;
}

/* The first piece whose end is past element a. */
static int s_first_after(const zt_held_t *h, int64_t a)
{
    int lo = 0, hi = h->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (h->p[mid]->b <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int zt_held_add(zt_held_t *h, int64_t a, int64_t b, const char *src, size_t bytes, zmq_msg_t *payload)
{
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        zt_held_piece_t **p = realloc(h->p, (size_t) cap * sizeof *p);
        if (!p)
            return ZT_ENOMEM;
        h->p = p;
        h->cap = cap;
    }
    zt_held_piece_t *x = h->spare ? h->spare : malloc(sizeof *x);
    if (!x)
        return ZT_ENOMEM;
    if (x == h->spare)
        h->spare = x->next;
    *x = (zt_held_piece_t) { .a = a, .b = b };
    if (payload && 2 * bytes < zmq_msg_size(payload)) {
        /* less than half of its frame is new (a resend overlapping what
         * came): copied, so that what is held never outgrows the chunk */
        if (!(x->own = malloc(bytes ? bytes : 1))) {
            x->next = h->spare;
            h->spare = x;
            return ZT_ENOMEM;
        }
        memcpy(x->own, src, bytes);
    }
    else if (payload) {
        zmq_msg_init(&x->msg);
        zmq_msg_copy(&x->msg, payload); /* a reference, not the bytes (but for tiny frames) */
        x->skip = (size_t) (src - (const char *) zmq_msg_data(payload));
    }
    else {
        x->shm = src;
        zt_shm_peer_pin(src, 1);
    }
    int at = s_first_after(h, a);
    memmove(h->p + at + 1, h->p + at, (size_t) (h->n - at) * sizeof *h->p);
    h->p[at] = x;
    h->n++;
    return ZT_OK;
}

/* Elements checked and added at a time: 16 KiB of float32, so that each
 * worker's part is added into what is still in L1. */
#define SUM_BLOCK 4096

/* Adds (first: copies) held's parts of [x, y) into acc (element x). */
static void s_gather(const zt_held_t *h, int64_t x, int64_t y, int dtype, float *acc, bool first)
{
    size_t es = zt_dtype_size(dtype);
    for (int i = s_first_after(h, x); i < h->n && h->p[i]->a < y; i++) {
        zt_held_piece_t *p = h->p[i];
        int64_t u = p->a > x ? p->a : x, v = p->b < y ? p->b : y;
        const char *s = s_src(p) + (u - p->a) * (int64_t) es;
        float *d = acc + (u - x);
        if (dtype == ZT_F32 && first)
            memcpy(d, s, (size_t) (v - u) * sizeof(float));
        else if (dtype == ZT_F32)
            zt_ar_add(d, s, v - u, ZT_F32);
        else
            for (int64_t j = 0; j < v - u; j++) {
                uint16_t half;
                memcpy(&half, s + 2 * j, 2);
                float f = dtype == ZT_F16 ? zt_f16_to_f32(half) : zt_bf16_to_f32(half);
                d[j] = first ? f : d[j] + f;
            }
    }
}

/* Where held has all of [x, y) in one piece: element x of it, else NULL. */
static const float *s_whole(const zt_held_t *h, int64_t x, int64_t y)
{
    int i = s_first_after(h, x);
    if (i >= h->n || h->p[i]->a > x || h->p[i]->b < y)
        return NULL;
    return (const float *) (s_src(h->p[i]) + (x - h->p[i]->a) * (int64_t) sizeof(float));
}

void zt_held_sum(const zt_held_t *held, int n, int64_t a, int64_t e, int dtype, void *out)
{
    float scratch[SUM_BLOCK];
    const float *whole[64];
    for (int64_t x = a; x < e; x += SUM_BLOCK) {
        int64_t y = e - x < SUM_BLOCK ? e : x + SUM_BLOCK;
        bool one_pass = dtype == ZT_F32 && n <= 64; /* the usual case: every worker's in one piece */
        int got = 0;
        while (one_pass && got < n && (whole[got] = s_whole(&held[got], x, y)))
            got++;
        if (one_pass && got == n) {
            zt_ar_sum_f32((float *) out + (x - a), whole, n, y - x);
            continue;
        }
        float *acc = dtype == ZT_F32 ? (float *) out + (x - a) : scratch;
        for (int r = 0; r < n; r++)
            s_gather(&held[r], x, y, dtype, acc, r == 0);
        if (dtype != ZT_F32)
            for (int64_t j = 0; j < y - x; j++) {
                uint16_t half = dtype == ZT_F16 ? zt_f32_to_f16(acc[j]) : zt_f32_to_bf16(acc[j]);
                memcpy((char *) out + 2 * (x - a + j), &half, 2);
            }
    }
}

void zt_held_release(zt_held_t *h, int64_t a, int64_t e, bool (*done)(void *arg, int64_t pa, int64_t pb),
                     void *arg)
{
    int i = s_first_after(h, a), keep = i;
    for (; i < h->n && h->p[i]->a < e; i++) {
        if (done(arg, h->p[i]->a, h->p[i]->b))
            s_let_go(h, h->p[i]);
        else
            h->p[keep++] = h->p[i];
    }
    memmove(h->p + keep, h->p + i, (size_t) (h->n - i) * sizeof *h->p);
    h->n -= i - keep;
}

void zt_held_clear(zt_held_t *h)
{
    for (int i = 0; i < h->n; i++)
        s_let_go(h, h->p[i]);
    h->n = 0;
}

void zt_held_free(zt_held_t *h)
{
    zt_held_clear(h);
    while (h->spare) {
        zt_held_piece_t *x = h->spare;
        h->spare = x->next;
        free(x);
    }
    free(h->p);
    *h = (zt_held_t) { 0 };
}

int64_t zt_held_count(const zt_held_t *h)
{
    int64_t n = 0;
    for (int i = 0; i < h->n; i++)
        n += h->p[i]->b - h->p[i]->a;
    return n;
}

static bool s_before(void *arg, int64_t pa, int64_t pb)
{
    (void) pa;
    return pb <= *(int64_t *) arg;
}

/* Each worker's whole range in one piece (the one-pass sum, here from
 * bytes one float past an aligned start): the same bits as want. */
static void s_selftest_whole(const float *v0, const float *v1, const float *v2, const float *want, int n)
{
    const float *v[3] = { v0, v1, v2 };
    size_t bytes = (size_t) n * sizeof(float);
    float *out = calloc((size_t) n, sizeof(float));
    zt_held_t w[3] = { { 0 } };
    zmq_msg_t frames[3];
    for (int r = 0; r < 3; r++) {
        zmq_msg_init_size(&frames[r], bytes + sizeof(float));
        memcpy((char *) zmq_msg_data(&frames[r]) + sizeof(float), v[r], bytes);
        assert(zt_held_add(&w[r], 0, n, (const char *) zmq_msg_data(&frames[r]) + sizeof(float), bytes,
                           &frames[r]) == ZT_OK);
        zmq_msg_close(&frames[r]);
    }
    zt_held_sum(w, 3, 0, n, ZT_F32, out);
    assert(!memcmp(out, want, bytes));
    zt_held_sum(w, 3, 4001, 4100, ZT_F32, out);
    assert(!memcmp(out, want + 4001, 99 * sizeof(float)));
    for (int r = 0; r < 3; r++)
        zt_held_free(&w[r]);
    /* one to seven sources (four a pass, then on), odd lengths: in order */
    const float *many[7];
    for (int k = 1; k <= 7; k++) {
        many[k - 1] = v[k % 3] + k;
        zt_ar_sum_f32(out, many, k, n - 8);
        for (int i = 0; i < n - 8; i++) {
            float x = many[0][i];
            for (int j = 1; j < k; j++)
                x += many[j][i];
            assert(memcmp(&x, &out[i], sizeof x) == 0);
        }
    }
    free(out);
}

void zt_held_selftest(void)
{
    /* Three workers' pieces of 10000 elements, cut differently and held
     * out of order: the sum is the same, bit for bit, as a plain one in
     * rank order, and summing in another order would differ. */
    enum { N = 10000 };
    static float v[3][N];
    for (int i = 0; i < N; i++) { /* (v0 + v1) + v2 rounds v0 away; (v2 + v1) + v0 is v0 */
        v[0][i] = (float) ((i * 7919) % 1000 - 500) / 3.0f + 0.1f;
        v[1][i] = 1e8f * (float) ((i * 104729) % 1000 + 1);
        v[2][i] = -v[1][i];
    }
    zt_held_t h[3] = { { 0 } };
    zmq_msg_t frames[3];
    int64_t cuts[3][4] = { { 0, 3000, 7001, N }, { 0, 5000, 9999, N }, { 0, 1, 4096, N } };
    for (int r = 2; r >= 0; r--) {
        zmq_msg_init_size(&frames[r], sizeof v[r]);
        memcpy(zmq_msg_data(&frames[r]), v[r], sizeof v[r]);
        for (int c = 2; c >= 0; c--) { /* backwards: insertion keeps them sorted */
            const char *at = (const char *) zmq_msg_data(&frames[r]) + cuts[r][c] * 4;
            assert(zt_held_add(&h[r], cuts[r][c], cuts[r][c + 1], at, (size_t) (cuts[r][c + 1] - cuts[r][c]) * 4,
                               &frames[r]) == ZT_OK);
        }
        zmq_msg_close(&frames[r]); /* the held references keep the bytes */
        assert(h[r].n == 3 && zt_held_count(&h[r]) == N && h[r].p[0]->a == 0);
    }
    static float out[N], want[N];
    zt_held_sum(h, 3, 0, N, ZT_F32, out);
    bool order_matters = false;
    for (int i = 0; i < N; i++) {
        want[i] = (v[0][i] + v[1][i]) + v[2][i];
        order_matters |= want[i] != (v[2][i] + v[1][i]) + v[0][i];
    }
    assert(order_matters && !memcmp(out, want, sizeof out));
    zt_held_sum(h, 3, 4000, 4100, ZT_F32, out); /* a part: element 4000 first */
    assert(!memcmp(out, want + 4000, 100 * sizeof(float)));
    s_selftest_whole(v[0], v[1], v[2], want, N);
    /* half precision: summed in float32, rounded once */
    uint16_t hv[2][8], hout[8];
    zt_held_t hh[2] = { { 0 } };
    zmq_msg_t hf[2];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 8; i++)
            hv[r][i] = zt_f32_to_bf16((float) (i + 1) * (r ? 0.5f : 1.0f));
        zmq_msg_init_size(&hf[r], sizeof hv[r]);
        memcpy(zmq_msg_data(&hf[r]), hv[r], sizeof hv[r]);
        assert(zt_held_add(&hh[r], 0, 8, zmq_msg_data(&hf[r]), sizeof hv[r], &hf[r]) == ZT_OK);
        zmq_msg_close(&hf[r]);
    }
    zt_held_sum(hh, 2, 0, 8, ZT_BF16, hout);
    for (int i = 0; i < 8; i++)
        assert(zt_bf16_to_f32(hout[i]) == (float) (i + 1) * 1.5f);
    /* let go of what ends before 7001 in [0, N): rank 0's first two */
    int64_t upto = 7001;
    zt_held_release(&h[0], 0, N, s_before, &upto);
    assert(h[0].n == 1 && h[0].p[0]->a == 7001 && zt_held_count(&h[0]) == N - 7001);
    for (int r = 0; r < 3; r++)
        zt_held_free(&h[r]);
    for (int r = 0; r < 2; r++)
        zt_held_free(&hh[r]);
}
