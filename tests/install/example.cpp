// The same as example.c, from C++: libztrain's headers are extern "C".
#include <ztrain/ztrain.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool ring(int rank, const char *ep0, const char *ep1)
{
    const char *peers[2] = { ep0, ep1 };
    zt_allreduce_opts_t o{};
    o.rank = rank;
    o.workers = 2;
    o.peers = peers;
    o.cycle_time_ms = -1;
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    const int64_t shape[1] = { 4096 };
    std::vector<float> x(4096);
    for (size_t i = 0; i < x.size(); i++)
        x[i] = rank == 0 ? 1.0f : static_cast<float>(i);
    int rc = ar && zt_allreduce_register(ar, "x", shape, 1, ZT_F32) == 0 ? zt_allreduce_commit(ar, 20000)
                                                                          : ZT_EINVAL;
    if (rc == ZT_OK)
        rc = zt_allreduce_submit(ar, 0, x.data());
    if (rc == ZT_OK)
        rc = zt_allreduce_wait(ar, true, 20000); // average over the two
    bool ok = rc == ZT_OK;
    for (size_t i = 0; ok && i < x.size(); i++)
        ok = x[i] == (1.0f + static_cast<float>(i)) / 2.0f;
    if (!ok)
        std::fprintf(stderr, "all-reduce: %s %s\n", zt_strerror(rc), ar ? zt_allreduce_error(ar) : "");
    zt_allreduce_destroy(&ar);
    return ok;
}

bool ps(const char *ep)
{
    const char *servers[1] = { ep };
    zt_ps_client_t *c = zt_ps_client_new(servers, 1, 0);
    zt_ps_options_t o;
    zt_ps_options_defaults(&o);
    o.optimizer = "sgd";
    o.learning_rate = 0.25f;
    std::vector<float> v(100), g(100, 2.0f);
    int t = c ? zt_ps_declare(c, "bias", 100, 0.0f) : -1;
    int rc = t < 0 ? ZT_EINVAL : zt_ps_connect(c, &o, 20000);
    for (int step = 0; rc == ZT_OK && step < 2; step++) { // two pushes: 0 - 2 * 0.25 * 2
        rc = zt_ps_push(c, t, g.data(), step);
        if (rc == ZT_OK)
            rc = zt_ps_wait(c, 20000);
    }
    if (rc == ZT_OK)
        rc = zt_ps_pull(c, t, v.data());
    if (rc == ZT_OK)
        rc = zt_ps_wait(c, 20000);
    bool ok = rc == ZT_OK;
    for (float f : v)
        ok = ok && f == -1.0f;
    if (!ok)
        std::fprintf(stderr, "parameter server: %s %s\n", zt_strerror(rc), c ? zt_ps_error(c) : "");
    zt_ps_client_destroy(&c);
    return ok;
}

} // namespace

int main(int argc, char **argv)
{
    zt_log_init("example++", 0);
    bool ok = false;
    std::string mode = argc > 1 ? argv[1] : "";
    if (argc == 5 && mode == "ring")
        ok = ring(std::strcmp(argv[2], "1") == 0, argv[3], argv[4]);
    else if (argc == 3 && mode == "ps")
        ok = ps(argv[2]);
    else {
        std::fprintf(stderr, "usage: example++ ring RANK EP0 EP1 | example++ ps ENDPOINT\n");
        return 2;
    }
    if (ok)
        std::printf("ok (libztrain %s)\n", zt_version());
    return ok ? 0 : 1;
}
