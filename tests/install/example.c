/* A program that uses libztrain as a library, built with nothing but
 * `pkg-config --cflags --libs ztrain` against an installed prefix.
 *
 *   example ring RANK ENDPOINT0 ENDPOINT1   two processes: a ring all-reduce
 *   example ps ENDPOINT                     push and pull against a paramserver
 *
 * Prints "ok" and exits 0 when the results are exact. */
#include <ztrain/ztrain.h>
#include <stdio.h>
#include <string.h>

static int s_ring(int rank, const char *ep0, const char *ep1)
{
    const char *peers[2] = { ep0, ep1 };
    zt_allreduce_opts_t o = { .rank = rank, .workers = 2, .peers = peers, .cycle_time_ms = -1 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    int64_t shape[1] = { 1000 };
    float x[1000];
    if (!ar || zt_allreduce_register(ar, "x", shape, 1, ZT_F32) != 0)
        return 1;
    int rc = zt_allreduce_commit(ar, 20000);
    for (int i = 0; i < 1000; i++)
        x[i] = (float) (i * (rank + 1)); /* rank 0: i, rank 1: 2i; sum 3i */
    if (rc == ZT_OK)
        rc = zt_allreduce_submit(ar, 0, x);
    if (rc == ZT_OK)
        rc = zt_allreduce_wait(ar, false, 20000);
    if (rc != ZT_OK) {
        fprintf(stderr, "all-reduce: %s: %s\n", zt_strerror(rc), zt_allreduce_error(ar));
        zt_allreduce_destroy(&ar);
        return 1;
    }
    for (int i = 0; i < 1000; i++)
        if (x[i] != (float) (3 * i)) {
            fprintf(stderr, "x[%d] = %g, want %d\n", i, x[i], 3 * i);
            return 1;
        }
    zt_allreduce_destroy(&ar);
    return 0;
}

static int s_ps(const char *ep)
{
    const char *servers[1] = { ep };
    zt_ps_client_t *c = zt_ps_client_new(servers, 1, 0);
    zt_ps_options_t o;
    zt_ps_options_defaults(&o);
    o.optimizer = "sgd";
    o.learning_rate = 0.5f;
    float v[256], g[256];
    int t = c ? zt_ps_declare(c, "w", 256, 0.0f) : -1; /* zeros */
    int rc = t < 0 ? ZT_EINVAL : zt_ps_connect(c, &o, 20000);
    for (int i = 0; i < 256; i++)
        g[i] = (float) i;
    if (rc == ZT_OK)
        rc = zt_ps_push(c, t, g, 0);
    if (rc == ZT_OK)
        rc = zt_ps_wait(c, 20000);
    if (rc == ZT_OK)
        rc = zt_ps_pull(c, t, v);
    if (rc == ZT_OK)
        rc = zt_ps_wait(c, 20000);
    if (rc != ZT_OK) {
        fprintf(stderr, "parameter server: %s: %s\n", zt_strerror(rc), c ? zt_ps_error(c) : "");
        zt_ps_client_destroy(&c);
        return 1;
    }
    for (int i = 0; i < 256; i++)
        if (v[i] != -0.5f * (float) i) { /* 0 - lr * g */
            fprintf(stderr, "w[%d] = %g, want %g\n", i, v[i], -0.5 * i);
            return 1;
        }
    zt_ps_client_destroy(&c);
    return 0;
}

int main(int argc, char **argv)
{
    zt_log_init("example", 0);
    int rc = 2;
    if (argc == 5 && !strcmp(argv[1], "ring"))
        rc = s_ring(argv[2][0] == '1', argv[3], argv[4]);
    else if (argc == 3 && !strcmp(argv[1], "ps"))
        rc = s_ps(argv[2]);
    else
        fprintf(stderr, "usage: example ring RANK EP0 EP1 | example ps ENDPOINT\n");
    if (rc == 0)
        printf("ok (libztrain %s)\n", zt_version());
    return rc;
}
