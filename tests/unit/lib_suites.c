/* Unit suites for the classes of libztrain that have no selftest of their
 * own: each asserts what the class promises in its header, against real
 * sockets and files where it has them (peers in threads of this process:
 * the ring, a reducer, a parameter server, a coordinator's ROUTER). */
#include "lib_suites.h"
#include "allreduce/zt_arlayout.h"
#include "base/zt_env.h"
#include "base/zt_refusals.h"
#include "base/zt_text.h"
#include "base/zt_util.h"
#include "zt_idx.h"
#include "runtime/zt_cmdline.h"
#include "runtime/zt_fileserver.h"
#include "runtime/zt_placeholder.h"
#include "runtime/zt_process.h"
#include "runtime/zt_server.h"
#include "wire/zt_bufpool.h"
#include "wire/zt_msg.h"
#include "wire/zt_transport.h"
#include "zt_ps_server.h"
#include "zt_reducer.h"
#include "ztrain/ztrain.h"
#include <assert.h>
#include <czmq.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* A fresh folder for one suite: TMPDIR (or /tmp)/zt-suite-NAME-PID. */
static char *s_tmp(const char *name)
{
    const char *t = getenv("TMPDIR");
    char *d = zt_strdupf("%s/zt-suite-%s-%d", t && *t ? t : "/tmp", name, (int) getpid());
    zt_rm_tree(d);
    assert(zt_mkdir_p(d) == ZT_OK);
    return d;
}

/* ------------------------------------------------------------ base */

void zt_suite_error(void)
{
    for (int code = 0; code >= -13; code--) { /* every code has a name and a text */
        assert(zt_error_name(code) && !strncmp(zt_error_name(code), "ZT_", 3));
        assert(strcmp(zt_strerror(code), "unknown error"));
    }
    assert(!strcmp(zt_error_name(ZT_ETIMEDOUT), "ZT_ETIMEDOUT"));
    assert(!strcmp(zt_error_name(ZT_ESHUTDOWN), "ZT_ESHUTDOWN"));
    assert(zt_error_name(-99) == NULL && !strcmp(zt_strerror(-99), "unknown error"));
    assert(zt_exit_status(0) == 0); /* success stays success, retryable or not */
    zt_fail_retryable();
    assert(zt_exit_status(0) == 0 && zt_exit_status(1) == ZT_EXIT_RETRY);
}

void zt_suite_half(void)
{
    assert(zt_f32_to_f16(1.0f) == 0x3C00 && zt_f16_to_f32(0x3C00) == 1.0f);
    assert(zt_f32_to_f16(-2.0f) == 0xC000 && zt_f32_to_f16(65504.0f) == 0x7BFF);
    assert(zt_f32_to_f16(1e6f) == 0x7C00);                       /* past the largest: infinity */
    assert(zt_f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00);          /* a tie rounds to even */
    assert(zt_f32_to_f16(1.0f + 3.0f / 2048) == 0x3C02);          /* ... up to even */
    assert(zt_f16_to_f32(0x0001) == ldexpf(1.0f, -24));           /* the smallest subnormal */
    assert(isnan(zt_f16_to_f32(zt_f32_to_f16(NAN))));
    assert(zt_f32_to_bf16(1.0f) == 0x3F80 && zt_bf16_to_f32(0x3F80) == 1.0f);
    assert(zt_bf16_to_f32(zt_f32_to_bf16(3.140625f)) == 3.140625f); /* exact in 8 bits of mantissa */
    assert(isnan(zt_bf16_to_f32(zt_f32_to_bf16(NAN))));
    for (int i = -1000; i <= 1000; i++) { /* every integer to 2048 survives float16 */
        float f = (float) i;
        assert(zt_f16_to_f32(zt_f32_to_f16(f)) == f);
    }
}

void zt_suite_log(void)
{
    char buf[256];
    int n = zt_log_prefix(buf, sizeof buf, 'W', "workerpool1-0", 42);
    assert(n == (int) strlen(buf));
    /* 2026-11-23T05:24:43.984Z W workerpool1-0[42]: */
    assert(n == 24 + 1 + 2 + strlen("workerpool1-0[42]: "));
    assert(buf[4] == '-' && buf[10] == 'T' && buf[19] == '.' && buf[23] == 'Z' && buf[25] == 'W');
    assert(!strcmp(buf + 27, "workerpool1-0[42]: "));
    assert(!isnan(zt_iso_epoch(buf)) && fabs(zt_iso_epoch(buf) - (double) time(NULL)) < 5);
    int fds[2];
    assert(pipe(fds) == 0);
    zt_log_tee(fds[1]); /* every line also to the tee */
    zt_log_set_level(ZT_LOG_INFO);
    zt_info("to the tee %d", 7);
    zt_debug("not at info");
    zt_warn("a peer's name: %s", "x\x1b]0;title\x07\n2026-01-01T00:00:00.000Z I coordinator/0[1]: forged");
    zt_log_tee(-1);
    close(fds[1]);
    char got[1024] = "";
    ssize_t r = read(fds[0], got, sizeof got - 1);
    close(fds[0]);
    assert(r > 0 && strstr(got, " I ") && strstr(got, "to the tee 7\n") && !strstr(got, "not at info"));
    /* escaped, and the newline goes on indented: no line of its own */
    assert(strstr(got, "a peer's name: x\\x1b]0;title\\x07\n    2026-01-01T00:00:00.000Z I coordinator"));
    assert(!strchr(got, 0x1b) && !strstr(got, "\n2026-01-01"));
}

void zt_suite_refusals(void)
{
    zt_refusals_t r = { 0 };
    int64_t total;
    zt_refusals_count(&r, "a thing", 1000);         /* logged */
    assert(r.total == 1 && r.unlogged == 0 && r.logged_ms == 1000);
    for (int i = 0; i < 50; i++)
        zt_refusals_count(&r, "a thing", 1000 + i); /* a flood within 5 s: no line */
    assert(r.total == 51 && r.unlogged == 50 && r.logged_ms == 1000);
    zt_refusals_count(&r, "a thing", 1000 + ZT_REFUSALS_LOG_MS); /* a line again, with the count since */
    assert(r.unlogged == 0 && r.logged_ms == 1000 + ZT_REFUSALS_LOG_MS);
    assert(zt_refusals_due(&r, 2000, &total) && total == 52);
    assert(!zt_refusals_due(&r, 2500, &total));     /* reported already */
    zt_refusals_count(&r, "a thing", 2600);
    assert(!zt_refusals_due(&r, 2600, &total));     /* within a second of the last report */
    assert(zt_refusals_due(&r, 3000, &total) && total == 53);
}

void zt_suite_util(void)
{
    long long v;
    assert(zt_parse_int("-12", &v) && v == -12);
    assert(!zt_parse_int("12x", &v) && !zt_parse_int("", &v) && !zt_parse_int("99999999999999999999", &v));
    assert(zt_parse_duration("7200s") == 7200 && zt_parse_duration("90") == 90);
    assert(zt_parse_duration("1.5h") == 5400 && zt_parse_duration("2m") == 120);
    assert(zt_parse_duration("2d") < 0 && zt_parse_duration("-1s") < 0 && zt_parse_duration("") < 0);
    assert(zt_iso_epoch("1970-01-01T00:01:00.500Z") == 60.5 && isnan(zt_iso_epoch("yesterday")));
    char *s = zt_strdupf("%s-%d", "a", 3);
    assert(!strcmp(s, "a-3"));
    free(s);
    char **v2 = calloc(3, sizeof *v2);
    v2[0] = strdup("x");
    v2[1] = strdup("y");
    zt_strv_free(v2);
    zt_strv_free(NULL);
    char *d = s_tmp("util");
    char *deep = zt_strdupf("%s/a/b/c", d), *f = zt_strdupf("%s/a/file", d);
    assert(zt_mkdir_p(deep) == ZT_OK && zt_mkdir_p(deep) == ZT_OK); /* twice: fine */
    assert(zt_write_file_atomic(f, "hello", 5) == ZT_OK);
    size_t len;
    char *text = zt_read_file(f, &len);
    assert(text && len == 5 && !strcmp(text, "hello"));
    free(text);
    char *tail = zt_file_tail(f, 3);
    assert(tail && !strcmp(tail, "llo"));
    free(tail);
    assert(zt_read_file("/nonexistent/ztrain", NULL) == NULL);
    /* trusted folders: this user's and closed to others, under folders of
     * this user's or root's, any that others can write to sticky */
    char why[1024], *mine = zt_strdupf("%s/mine", d), *open_ = zt_strdupf("%s/open", d),
         *under = zt_strdupf("%s/open/job", d), *sticky = zt_strdupf("%s/sticky", d),
         *in_sticky = zt_strdupf("%s/sticky/job", d);
    assert(zt_mkdir_trusted(mine, why, sizeof why) == ZT_OK && zt_dir_trusted(mine, why, sizeof why) == ZT_OK);
    assert(mkdir(open_, 0700) == 0 && chmod(open_, 0777) == 0);
    assert(zt_dir_trusted(open_, why, sizeof why) == ZT_EINVAL && strstr(why, "mode 0777"));
    assert(zt_mkdir_trusted(under, why, sizeof why) == ZT_EINVAL && access(under, F_OK) != 0); /* not made */
    assert(mkdir(sticky, 0700) == 0 && chmod(sticky, 01777) == 0);
    assert(zt_mkdir_trusted(in_sticky, why, sizeof why) == ZT_OK); /* as under /tmp */
    if (geteuid() == 0) { /* another user's folder: named */
        assert(chmod(mine, 0700) == 0 && chown(mine, 54321, 54321) == 0);
        assert(zt_dir_trusted(mine, why, sizeof why) == ZT_EINVAL && strstr(why, "uid 54321"));
    }
    assert(zt_dir_trusted("/nonexistent/ztrain", why, sizeof why) == ZT_EINVAL);
    /* validate's check makes nothing; a folder to be made in an open one is refused */
    char *fresh = zt_strdupf("%s/fresh/a/b", d), *fresh_top = zt_strdupf("%s/fresh", d);
    assert(zt_dir_fit(fresh, why, sizeof why) == ZT_OK && access(fresh_top, F_OK) != 0);
    assert(zt_dir_fit(under, why, sizeof why) == ZT_EINVAL && strstr(why, "mode 0777"));
    /* made 0700 through the chain; a link where a folder is to be made is refused */
    int dfd = zt_dir_open_trusted(fresh, ZT_DIR_MAKE, why, sizeof why);
    struct stat fst;
    assert(dfd >= 0 && fstat(dfd, &fst) == 0 && (fst.st_mode & 0777) == 0700);
    close(dfd);
    char *planted = zt_strdupf("%s/fresh/a/b/l", d), *below = zt_strdupf("%s/fresh/a/b/l/x", d);
    if (geteuid() == 0) { /* another user's link is not followed (this user's is) */
        assert(symlink("/nonexistent-zt", planted) == 0 && lchown(planted, 54321, 54321) == 0);
        assert(zt_mkdir_trusted(below, why, sizeof why) == ZT_EINVAL && strstr(why, "is a link made by uid 54321"));
        assert(access("/nonexistent-zt", F_OK) != 0 && unlink(planted) == 0);
    }
    assert(symlink(".", planted) == 0);
    assert(zt_mkdir_trusted(below, why, sizeof why) == ZT_OK && zt_dir_trusted(below, why, sizeof why) == ZT_OK);
    free(fresh);
    free(fresh_top);
    free(planted);
    free(below);
    free(mine);
    free(open_);
    free(under);
    free(sticky);
    free(in_sticky);
    assert(zt_rm_tree(d) == ZT_OK && access(d, F_OK) != 0);
    assert(zt_proc_alive(getpid(), zt_proc_start_time(getpid())));
    assert(!zt_proc_alive(getpid(), zt_proc_start_time(getpid()) + 1)); /* a pid used again is not us */
    free(deep);
    free(f);
    free(d);
}

void zt_suite_env(void)
{
    setenv("ZT_INDEX", "3", 1);
    setenv("ZT_REDUCERS", "a:1,b:2", 1);
    setenv("CLUSTER_SPEC", "{\"cluster\": {\"workerpool0\": [\"h0:10\"], \"workerpool1\": [\"h1:11\", \"h2:12\"]},"
           " \"task\": {\"type\": \"workerpool1\", \"index\": 0}}", 1);
    setenv("ZT_HOSTS", "{\"h1:11\": \"node-a\"}", 1);
    int64_t i;
    assert(!strcmp(zt_env_name(ZT_ENV_INDEX), "ZT_INDEX") && !strcmp(zt_env_get(ZT_ENV_INDEX), "3"));
    assert(zt_env_int(ZT_ENV_INDEX, &i) && i == 3 && zt_env_int_or(ZT_ENV_POOL, -5) == -5);
    assert(zt_env_lookup("HP_METRIC_FILE") == ZT_ENV_HP_METRIC_FILE && zt_env_lookup("NOPE") == -1);
    assert(!strcmp(zt_job_env_name("HP_METRIC_FILE"), "CLOUD_ML_HP_METRIC_FILE") && !zt_job_env_name("x"));
    int n;
    char **l = zt_env_list(ZT_ENV_REDUCERS, &n);
    assert(n == 2 && !strcmp(l[0], "a:1") && !strcmp(l[1], "b:2") && !l[2]);
    zt_env_free(l);
    l = zt_env_pool(1, &n);
    assert(n == 2 && !strcmp(l[1], "h2:12"));
    zt_env_free(l);
    l = zt_env_pool(3, &n); /* a pool the spec lacks: empty */
    assert(n == 0);
    zt_env_free(l);
    char who[256];
    zt_env_describe_addr("tcp://h1:11", who, sizeof who);
    assert(strstr(who, "workerpool1-0") && strstr(who, "node-a"));
    zt_env_describe_rank(2, who, sizeof who); /* rank 2: pool 1's second */
    assert(strstr(who, "workerpool1-1"));
    zt_env_describe_addr("elsewhere:1", who, sizeof who);
    assert(strstr(who, "elsewhere:1") && !strstr(who, "workerpool"));
    /* the replica a sealed stream asks for: pool 0's, never pool 1's (its
     * places are ranks), nobody's elsewhere */
    char name[64];
    assert(zt_env_replica_at("tcp://h0:10", name, sizeof name) && !strcmp(name, "workerpool0-0"));
    assert(!zt_env_replica_at("h2:12", name, sizeof name) && !name[0]);
    assert(!zt_env_replica_at("elsewhere:1", name, sizeof name) && !name[0]);
    unsetenv("ZT_INDEX");
    unsetenv("ZT_REDUCERS");
    unsetenv("CLUSTER_SPEC");
    unsetenv("ZT_HOSTS");
}

void zt_suite_text(void)
{
    assert(zt_utf8_valid("plain", 5) && zt_utf8_valid("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
    assert(!zt_utf8_valid("\xff", 1) && !zt_utf8_valid("\xc0\xaf", 2));       /* not UTF-8; overlong '/' */
    assert(!zt_utf8_valid("\xed\xa0\x80", 3) && !zt_utf8_valid("\xf4\x90\x80\x80", 4)); /* surrogate; past U+10FFFF */
    assert(!zt_utf8_valid("\xe2\x82", 2) && !zt_utf8_valid("\xe0\x80\x80", 3)); /* cut short; overlong */
    char out[128];
    const char *in = "a\x1b[2J\tb\nc\x7f\xc2\x9b" "d\xff\xc3\xa9";
    size_t n = zt_text_escape(out, sizeof out, in, strlen(in), NULL);
    assert(n == strlen(out));
    assert(!strcmp(out, "a\\x1b[2J\tb\\x0ac\\x7f\\xc2\\x9bd\\xff\xc3\xa9"));
    zt_text_escape(out, sizeof out, "one\ntwo", 7, "\n    ");
    assert(!strcmp(out, "one\n    two"));
    zt_text_escape(out, 6, "abc\x1b", 4, NULL); /* cut before an escape that does not fit whole */
    assert(!strcmp(out, "abc"));
    zt_text_escape(out, 3, "\xc3\xa9\xc3\xa9", 4, NULL); /* and at a whole character */
    assert(!strcmp(out, "\xc3\xa9"));
    assert(!strcmp(zt_text_safe("x\x1by", 0), "x\\x1by") && !strcmp(zt_text_safe(NULL, 1), ""));
}

/* ------------------------------------------------------------ model, wire */

/* A gzipped IDX file: magic (0, 0, 8, ndims), the sizes, the bytes. */
static void s_write_idx(const char *path, int ndims, const int *dims, const uint8_t *data, size_t n)
{
    gzFile f = gzopen(path, "wb");
    assert(f);
    uint8_t magic[4] = { 0, 0, 8, (uint8_t) ndims };
    gzwrite(f, magic, 4);
    for (int i = 0; i < ndims; i++) {
        uint8_t be[4] = { (uint8_t) (dims[i] >> 24), (uint8_t) (dims[i] >> 16), (uint8_t) (dims[i] >> 8),
                          (uint8_t) dims[i] };
        gzwrite(f, be, 4);
    }
    gzwrite(f, data, (unsigned) n);
    gzclose(f);
}

void zt_suite_idx(void)
{
    char *d = s_tmp("idx"), err[512], *p;
    uint8_t px[5 * 2 * 3], lb[5] = { 3, 1, 4, 1, 5 };
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t) i;
    int di[3] = { 5, 2, 3 }, dl[1] = { 5 };
    s_write_idx(p = zt_strdupf("%s/t-images-idx3-ubyte.gz", d), 3, di, px, sizeof px);
    free(p);
    s_write_idx(p = zt_strdupf("%s/t-labels-idx1-ubyte.gz", d), 1, dl, lb, sizeof lb);
    free(p);
    zt_dataset_t ds;
    assert(zt_dataset_load(d, "t", 0, &ds, err, sizeof err) == 0);
    assert(ds.n == 5 && ds.dim == 6 && ds.x[6] == 6 && ds.y[2] == 4);
    zt_dataset_free(&ds);
    assert(zt_dataset_load(d, "t", 2, &ds, err, sizeof err) == 0 && ds.n == 2); /* the first 2 */
    zt_dataset_free(&ds);
    int bad[1] = { 4 }; /* 4 labels for 5 images: refused, naming the file */
    s_write_idx(p = zt_strdupf("%s/u-images-idx3-ubyte.gz", d), 3, di, px, sizeof px);
    free(p);
    s_write_idx(p = zt_strdupf("%s/u-labels-idx1-ubyte.gz", d), 1, bad, lb, 4);
    free(p);
    assert(zt_dataset_load(d, "u", 0, &ds, err, sizeof err) != 0 && strstr(err, "u-"));
    assert(zt_dataset_load(d, "none", 0, &ds, err, sizeof err) != 0 && strstr(err, "none-images-idx3-ubyte.gz"));
    zt_rm_tree(d);
    free(d);
}

void zt_suite_bufpool(void)
{
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    assert(zmq_bind(a, "inproc://bufpool") == 0 && zmq_connect(b, "inproc://bufpool") == 0);
    zt_bufpool_t *pool = zt_bufpool_new();
    char data[4096], got[4096];
    for (int round = 0; round < 50; round++) {
        memset(data, round, sizeof data);
        zmq_msg_t m;
        assert(zt_bufpool_msg(pool, &m, data, sizeof data) == 0);
        assert(zmq_msg_send(&m, a, 0) == (int) sizeof data);
        assert(zmq_recv(b, got, sizeof got, 0) == (int) sizeof data && !memcmp(got, data, sizeof data));
    }
    assert(zt_bufpool_allocations(pool) <= 4); /* the buffers came back and were lent again */
    /* a burst: eight lent at once, then back; unused for the idle time,
     * they are freed by the next lending, which keeps one */
    zt_bufpool_set_idle_ms(pool, 50);
    zmq_msg_t burst[8];
    static char big[1 << 20];
    for (int i = 0; i < 8; i++)
        assert(zt_bufpool_msg(pool, &burst[i], big, sizeof big) == 0);
    assert(zt_bufpool_bytes(pool) >= 8 * sizeof big);
    for (int i = 0; i < 8; i++)
        zmq_msg_close(&burst[i]);
    assert(zt_bufpool_bytes(pool) >= 8 * sizeof big); /* back, kept while in use recently */
    usleep(100 * 1000);
    zmq_msg_t m;
    assert(zt_bufpool_msg(pool, &m, data, sizeof data) == 0);
    assert(zt_bufpool_bytes(pool) == sizeof big); /* only the one lent now (a burst's, reused) */
    zmq_msg_close(&m);
    zt_bufpool_destroy(&pool);
    assert(pool == NULL);
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}

/* ------------------------------------------------------------ runtime */

typedef struct {
    int seen[8];
    char values[8][64];
} s_flags_seen_t;

static int s_on_flag(int id, const char *value, void *ctx)
{
    s_flags_seen_t *s = ctx;
    s->seen[id]++;
    snprintf(s->values[id], sizeof s->values[id], "%s", value ? value : "");
    return id == 3 && value && !strcmp(value, "bad") ? -1 : 0;
}

static int s_parse(const zt_flag_t *flags, s_flags_seen_t *s, int argc, char **argv)
{
    memset(s, 0, sizeof *s);
    FILE *saved = stdout; /* --help prints; keep the suite's output short */
    stdout = fopen("/dev/null", "w");
    int rc = zt_cmdline_parse("zt_test", "usage: zt_test", 0, flags, argc, argv, s_on_flag, s);
    fclose(stdout);
    stdout = saved;
    return rc;
}

void zt_suite_cmdline(void)
{
    const zt_flag_t flags[] = {
        { "checkpoint-dir", required_argument, 1, "DIR", "where" },
        { "quiet", no_argument, 2, NULL, "less" },
        { "mode", required_argument, 3, "M", "how" },
        { NULL, 0, 0, NULL, NULL },
    };
    s_flags_seen_t s;
    char *a1[] = { "zt_test", "--checkpoint_dir", "/x", "--quiet", "--mode=fast", NULL };
    assert(s_parse(flags, &s, 5, a1) == 0); /* both spellings, both forms of a value */
    assert(s.seen[1] == 1 && !strcmp(s.values[1], "/x") && s.seen[2] == 1 && !strcmp(s.values[3], "fast"));
    char *a2[] = { "zt_test", "--checkpoint-dir", "/y", NULL };
    assert(s_parse(flags, &s, 3, a2) == 0 && !strcmp(s.values[1], "/y"));
    char *a3[] = { "zt_test", "--nope", NULL };
    assert(s_parse(flags, &s, 2, a3) == 2);   /* unknown */
    char *a4[] = { "zt_test", "--mode", NULL };
    assert(s_parse(flags, &s, 2, a4) == 2);   /* no value */
    char *a5[] = { "zt_test", "stray", NULL };
    assert(s_parse(flags, &s, 2, a5) == 2);   /* a stray argument */
    char *a6[] = { "zt_test", "--mode", "bad", NULL };
    assert(s_parse(flags, &s, 3, a6) == 2);   /* the callback refused it */
    char *a7[] = { "zt_test", "--help", NULL };
    assert(s_parse(flags, &s, 2, a7) == 1);
    char *a8[] = { "zt_test", "--version", NULL };
    assert(s_parse(flags, &s, 2, a8) == 1);
}

void zt_suite_placeholder(void)
{
    zt_placeholder_opts_t o = { false, -1, 0 };
    assert(zt_placeholder_flag("b", ZT_PLACEHOLDER_FLAG_ID + 1, "2.5", &o) == 0 && o.placeholder &&
           o.run_seconds == 2.5);
    assert(zt_placeholder_flag("b", ZT_PLACEHOLDER_FLAG_ID + 2, "7", &o) == 0 && o.exit_code == 7);
    assert(zt_placeholder_flag("b", ZT_PLACEHOLDER_FLAG_ID, NULL, &o) == 0 && o.run_seconds == -1);
    assert(zt_placeholder_flag("b", ZT_PLACEHOLDER_FLAG_ID + 1, "-1", &o) == -1);
    assert(zt_placeholder_flag("b", ZT_PLACEHOLDER_FLAG_ID + 2, "256", &o) == -1);
    assert(zt_placeholder_flag("b", ZT_PLACEHOLDER_FLAG_ID + 2, "x", &o) == -1);
    assert(zt_placeholder_flag("b", 5, "x", &o) == 1); /* not one of its flags */
}

void zt_suite_server(void)
{
    setenv("ZT_ADDRESS", "127.0.0.1:4567", 1);
    setenv("ZT_INDEX", "1", 1);
    setenv("CLUSTER_SPEC", "{\"cluster\": {\"workerpool2\": [\"a:1\", \"b:2\", \"c:3\"]}}", 1);
    setenv("AIP_CHECKPOINT_DIR", "/ck", 1);
    zt_server_place_t p;
    char *a1[] = { "srv", NULL };
    assert(zt_server_place("srv", "usage", 0, true, 1, a1, &p) == 0);
    assert(!strcmp(p.bind, "tcp://127.0.0.1:4567") && p.index == 1 && p.count == 3 &&
           !strcmp(p.checkpoint_dir, "/ck"));
    char *a2[] = { "srv", "--bind", "ipc:///x", "--index", "0", "--servers", "2", "--checkpoint-dir", "/d", NULL };
    assert(zt_server_place("srv", "usage", 0, true, 9, a2, &p) == 0); /* flags win */
    assert(!strcmp(p.bind, "ipc:///x") && p.index == 0 && p.count == 2 && !strcmp(p.checkpoint_dir, "/d"));
    char *a3[] = { "srv", "--checkpoint-dir", "/d", NULL };
    assert(zt_server_place("srv", "usage", 0, false, 3, a3, &p) == 2); /* a reducer has no checkpoints */
    char *a4[] = { "srv", "--index", "minus", NULL };
    assert(zt_server_place("srv", "usage", 0, true, 3, a4, &p) == 2);
    unsetenv("ZT_ADDRESS");
    unsetenv("ZT_INDEX");
    unsetenv("CLUSTER_SPEC");
    unsetenv("AIP_CHECKPOINT_DIR");
}

void zt_suite_process(void)
{
    setenv("ZT_HEARTBEAT_MS", "soon", 1);
    assert(!zt_process_knobs_ok()); /* logged, and the binary exits */
    unsetenv("ZT_HEARTBEAT_MS");
    assert(zt_process_knobs_ok());
    zt_refusals_t r = { 0 };
    zt_process_refused(&r, NULL, "refused_total", "a malformed thing");
    zt_process_refused(&r, NULL, "refused_total", "a malformed thing");
    assert(r.total == 2 && r.reported == 0); /* no replica: counted, not reported */
    assert(!zt_process_stop_requested(NULL));
}

void zt_suite_job(void)
{
    char why[512];
    zt_job_t job;
    unsetenv("CLUSTER_SPEC");
    assert(zt_job_read(&job, why, sizeof why) == ZT_ENOTFOUND && strstr(why, "ztrain run"));
    setenv("CLUSTER_SPEC", "{\"cluster\": {\"workerpool0\": [\"h0:10\"], \"workerpool1\": [\"h1:11\"],"
           " \"workerpool2\": [\"r:1\"]}}", 1);
    setenv("ZT_POOL", "1", 1);
    setenv("ZT_INDEX", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", "1", 1);
    setenv("ZT_REDUCERS", "r:1", 1);
    assert(zt_job_read(&job, why, sizeof why) == ZT_OK);
    assert(job.rank == 1 && job.size == 2 && job.npeers == 2 && !strcmp(job.peers[1], "h1:11") &&
           job.nreducers == 1 && !strcmp(job.name, "workerpool1-0"));
    zt_job_free(&job);
    setenv("WORLD_SIZE", "3", 1); /* CLUSTER_SPEC names 2 trainers */
    assert(zt_job_read(&job, why, sizeof why) == ZT_ESPEC && strstr(why, "2 trainers"));
    setenv("RANK", "x", 1);
    assert(zt_job_read(&job, why, sizeof why) == ZT_ESPEC && strstr(why, "RANK=x"));
    setenv("ZT_POOL", "2", 1); /* a reducer does not train */
    assert(zt_job_read(&job, why, sizeof why) == ZT_ESPEC && strstr(why, "does not train"));
    setenv("AIP_CHECKPOINT_DIR", "/a/b//", 1);
    assert(!strcmp(zt_job_checkpoint_dir(false), "/a/b"));
    unsetenv("AIP_MODEL_DIR");
    assert(!strcmp(zt_job_checkpoint_dir(true), "model"));
    const char *vars[] = { "CLUSTER_SPEC", "ZT_POOL", "ZT_INDEX", "WORLD_SIZE", "RANK", "ZT_REDUCERS",
                           "AIP_CHECKPOINT_DIR" };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}

void zt_suite_fileserver(void)
{
    char *d = s_tmp("files"), err[512];
    char *sub = zt_strdupf("%s/ckpt", d), *f = zt_strdupf("%s/ckpt/data.bin", d), *got = zt_strdupf("%s/got", d);
    zt_mkdir_p(sub);
    size_t n = 3 * ZT_FILESERVER_CHUNK + 17; /* more than one chunk */
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (char) (i * 7);
    assert(zt_write_file_atomic(f, data, n) == ZT_OK);
    char *link = zt_strdupf("%s/ckpt/passwd", d);
    assert(symlink("/etc/passwd", link) == 0); /* a planted link serves nothing */
    const char *const roots[1][2] = { { "checkpoints", d } };
    zt_fileserver_t *fs = zt_fileserver_new("tcp://127.0.0.1:*", roots, 1);
    assert(fs && zt_fileserver_endpoint(fs));
    zt_bulk_t *dealer = zt_bulk_connect(ZT_PLANE_CONTROL, zt_fileserver_endpoint(fs), false);
    assert(zt_file_fetch(dealer, "checkpoints/ckpt/data.bin", got, 5000, err, sizeof err) == ZT_OK);
    size_t len;
    char *back = zt_read_file(got, &len);
    assert(back && len == n && !memcmp(back, data, n));
    free(back);
    assert(zt_file_fetch(dealer, "checkpoints/ckpt/passwd", got, 5000, err, sizeof err) != ZT_OK);
    assert(zt_file_fetch(dealer, "checkpoints/../etc/passwd", got, 5000, err, sizeof err) != ZT_OK);
    assert(zt_file_fetch(dealer, "other/ckpt/data.bin", got, 5000, err, sizeof err) != ZT_OK);
    zt_bulk_destroy(&dealer, 0);
    zt_fileserver_destroy(&fs);
    zt_rm_tree(d);
    free(data);
    free(link);
    free(sub);
    free(f);
    free(got);
    free(d);
}

/* A coordinator's side of a replica's registration: REGISTER answered with
 * WELCOME and STATUS RUNNING; then what the replica sends is recorded. */
typedef struct {
    zsock_t *router;
    atomic_int registered, metric, heartbeats;
    char role[ZT_MSG_STR_MAX];
    int pool, index;
    double value;
} s_coord_t;

static void *s_fake_coordinator(void *arg)
{
    s_coord_t *c = arg;
    int64_t until = zt_now_ms() + 10000;
    zframe_t *id = NULL;
    while (zt_now_ms() < until && !(atomic_load(&c->metric) && atomic_load(&c->heartbeats) >= 2)) {
        zsock_set_rcvtimeo(c->router, 100);
        zmsg_t *zm = zmsg_recv(c->router);
        if (!zm)
            continue;
        zframe_t *who = zmsg_pop(zm), *body = zmsg_pop(zm);
        zt_msg_t m;
        if (body && zt_msg_decode(zframe_data(body), zframe_size(body), &m, NULL) == ZT_OK) {
            if (m.type == ZT_MSG_REGISTER) {
                snprintf(c->role, sizeof c->role, "%s", m.u.REGISTER.role);
                c->pool = m.pool;
                c->index = m.index;
                zframe_destroy(&id);
                id = zframe_dup(who);
                zt_msg_t w = { .type = ZT_MSG_WELCOME };
                w.u.WELCOME.heartbeat_ms = 50;
                zt_msg_send(c->router, id, &w);
                zt_msg_t s = { .type = ZT_MSG_STATUS };
                zt_msg_set_str(s.u.STATUS.state, "RUNNING");
                s.u.STATUS.running = true;
                zt_msg_send(c->router, id, &s);
                atomic_store(&c->registered, 1);
            }
            else if (m.type == ZT_MSG_METRIC && !strcmp(m.u.METRIC.name, "loss")) {
                c->value = m.u.METRIC.value;
                atomic_store(&c->metric, 1);
            }
            else if (m.type == ZT_MSG_HEARTBEAT)
                atomic_fetch_add(&c->heartbeats, 1);
        }
        zframe_destroy(&who);
        zframe_destroy(&body);
        zmsg_destroy(&zm);
    }
    zframe_destroy(&id);
    return NULL;
}

void zt_suite_replica(void)
{
    unsetenv("ZT_COORDINATOR");
    assert(zt_replica_new("worker", 500) == NULL); /* not started by ztrain run */
    int port = 0; /* bound as ztrain's coordinator binds: with its ipc twin, where replicas connect */
    s_coord_t c = { .router = zt_sock_router(ZT_PLANE_CONTROL, "tcp://127.0.0.1:*", &port) };
    assert(c.router && port > 0);
    char *ep = zt_strdupf("tcp://127.0.0.1:%d", port);
    setenv("ZT_COORDINATOR", ep, 1);
    setenv("ZT_POOL", "1", 1);
    setenv("ZT_INDEX", "2", 1);
    setenv("ZT_INCARNATION", "0", 1);
    pthread_t t;
    pthread_create(&t, NULL, s_fake_coordinator, &c);
    zt_replica_t *rep = zt_replica_new("worker", 5000);
    assert(rep && zt_replica_pool(rep) == 1 && zt_replica_index(rep) == 2);
    assert(zt_replica_wait_running(rep, 5000) == ZT_OK);
    assert(zt_replica_report_metric(rep, "loss", 0.25, 10) == ZT_OK);
    pthread_join(t, NULL);
    assert(c.registered && !strcmp(c.role, "worker") && c.pool == 1 && c.index == 2);
    assert(c.metric && c.value == 0.25 && c.heartbeats >= 2); /* heartbeats from the replica's own thread */
    assert(!zt_replica_shutdown_requested(rep));
    zt_replica_destroy(&rep);
    assert(rep == NULL);
    zt_sock_destroy(&c.router);
    /* a coordinator that never answers: NULL within the timeout */
    zsock_t *mute = zsock_new_router("tcp://127.0.0.1:*");
    char *ep2 = strdup(zsock_endpoint(mute));
    setenv("ZT_COORDINATOR", ep2, 1);
    int64_t t0 = zt_now_ms();
    assert(zt_replica_new("worker", 300) == NULL && zt_now_ms() - t0 < 3000);
    zsock_destroy(&mute);
    const char *vars[] = { "ZT_COORDINATOR", "ZT_POOL", "ZT_INDEX", "ZT_INCARNATION" };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
    free(ep);
    free(ep2);
}

/* ------------------------------------------------------------ ps, allreduce */

static atomic_int s_servers_stop;

static bool s_should_stop(void *arg)
{
    (void) arg;
    return atomic_load(&s_servers_stop) != 0;
}

static void *s_run_ps(void *arg)
{
    zt_ps_server_run(arg, s_should_stop, NULL);
    return NULL;
}

void zt_suite_ps_client(void)
{
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", zt_ephemeral_port());
    zt_ps_server_opts_t so = { .bind = ep, .index = 0, .servers = 1 };
    zt_ps_server_t *srv = zt_ps_server_new(&so);
    assert(srv);
    atomic_store(&s_servers_stop, 0);
    pthread_t t;
    pthread_create(&t, NULL, s_run_ps, srv);
    const char *eps[1] = { ep };
    zt_ps_client_t *c = zt_ps_client_new(eps, 1, 0);
    assert(zt_ps_declare(c, "w", 10, 0) == 0 && zt_ps_declare(c, "b", 3, 0) == 1);
    zt_ps_options_t o;
    zt_ps_options_defaults(&o);
    assert(!strcmp(o.optimizer, "adam") && o.workers >= 1);
    o.optimizer = "sgd";
    o.learning_rate = 0.5f;
    assert(zt_ps_connect(c, &o, 5000) == ZT_OK);
    assert(zt_ps_tensors(c) == 2 && zt_ps_total(c) == 13 && !strcmp(zt_ps_tensor_name(c, 1), "b"));
    float g[10], w[10];
    for (int i = 0; i < 10; i++)
        g[i] = (float) i;
    assert(zt_ps_push(c, 0, g, 0) == ZT_OK && zt_ps_pull(c, 0, w) == ZT_OK && zt_ps_wait(c, 5000) == ZT_OK);
    for (int i = 0; i < 10; i++)
        assert(w[i] == -0.5f * (float) i); /* zeros, then one SGD step */
    for (int i = 0; zt_ps_optimizer(i); i++) /* the table the Python package reads */
        assert(i < 16 && strlen(zt_ps_optimizer(i)) > 0);
    assert(!strcmp(zt_ps_optimizer(0), "sgd") && zt_ps_optimizer(-1) == NULL);
    atomic_store(&s_servers_stop, 1);
    pthread_join(t, NULL);
    zt_ps_server_destroy(&srv);
    assert(zt_ps_pull(c, 0, w) == ZT_OK && zt_ps_wait(c, 300) == ZT_ETIMEDOUT); /* the code it had */
    assert(strstr(zt_ps_error(c), "did not answer"));
    zt_ps_client_destroy(&c);
}

void zt_suite_arlayout(void)
{
    json_t *tensors = json_pack("[{s:s, s:[i,i], s:i}, {s:s, s:[i], s:i}, {s:s, s:[i], s:i}, {s:s, s:[i], s:i}]",
                                "name", "a", "shape", 100, 10, "dtype", ZT_F32, "name", "b", "shape", 10, "dtype",
                                ZT_F32, "name", "c", "shape", 2000, "dtype", ZT_F32, "name", "d", "shape", 8,
                                "dtype", ZT_F16);
    zt_ar_layout_t l;
    assert(zt_ar_layout_build(&l, tensors, 4096, 4096) == ZT_OK);
    /* a (4000 B) and b (40 B) fit 4096 together; c (8000 B) alone; d another dtype */
    assert(l.ntensors == 4 && l.nbuckets == 3);
    assert(l.bucket[0] == 0 && l.bucket[1] == 0 && l.offset[1] == 1000 && l.buckets[0].numel == 1010);
    assert(l.bucket[2] == 1 && l.buckets[1].numel == 2000 && l.bucket[3] == 2 && l.buckets[2].dtype == ZT_F16);
    zt_ar_layout_free(&l);
    json_t *bad = json_pack("[{s:s, s:[i], s:i}]", "name", "x", "shape", -1, "dtype", ZT_F32);
    assert(zt_ar_layout_build(&l, bad, 4096, 4096) == ZT_EINVAL);
    json_decref(bad);
    json_decref(tensors);
    int64_t lo, hi, covered = 0; /* chunks of a large bucket cover it once */
    for (int r = 0; r < 3; r++) {
        zt_ar_chunk(1 << 20, 4, 0, 3, r, &lo, &hi);
        assert(lo == covered && hi > lo);
        covered = hi;
    }
    assert(covered == 1 << 20);
    zt_ar_chunk(100, 4, 5, 3, 5 % 3, &lo, &hi); /* a small bucket goes whole to one reducer */
    assert(lo == 0 && hi == 100);
    zt_ar_chunk(100, 4, 5, 3, 0, &lo, &hi);
    assert(lo == hi);
    float x[5] = { 1, 2, 3, 4, 5 }, y[5] = { 1, 1, 1, 1, 1 };
    zt_ar_add(x, y, 5, ZT_F32);
    assert(x[0] == 2 && x[4] == 6);
    assert(zt_all_finite(x, 5, ZT_F32));
    x[3] = NAN;
    assert(!zt_all_finite(x, 5, ZT_F32));
    assert(zt_dtype_size(ZT_BF16) == 2 && !strcmp(zt_dtype_name(ZT_F16), "float16"));
}

typedef struct {
    int rank, workers, nreducers;
    const char **peers, **reducers;
    int ok;
} s_worker_t;

/* One worker of an all-reduce group: two rounds of 3 tensors, summed,
 * then averaged. */
static void *s_ar_worker(void *arg)
{
    s_worker_t *w = arg;
    zt_allreduce_opts_t o = { w->rank, w->workers, w->reducers, w->nreducers, w->peers, 0, -1, 0, 0, 0 };
    zt_allreduce_t *ar = zt_allreduce_new(&o);
    int64_t shapes[3] = { 5000, 17, 300000 };
    float *t[3];
    for (int k = 0; k < 3; k++) {
        assert(zt_allreduce_register(ar, k == 0 ? "a" : k == 1 ? "b" : "c", &shapes[k], 1, ZT_F32) == k);
        t[k] = malloc((size_t) shapes[k] * sizeof(float));
    }
    w->ok = zt_allreduce_commit(ar, 10000) == ZT_OK;
    for (int round = 0; w->ok && round < 2; round++) {
        for (int k = 2; k >= 0; k--) {
            for (int64_t i = 0; i < shapes[k]; i++)
                t[k][i] = (float) (w->rank + 1) * (float) (i % 100 + k);
            assert(zt_allreduce_submit(ar, k, t[k]) == ZT_OK);
        }
        w->ok = zt_allreduce_wait(ar, round == 1, 10000) == ZT_OK;
        float ranks = (float) (w->workers * (w->workers + 1) / 2);
        for (int k = 0; w->ok && k < 3; k++)
            for (int64_t i = 0; i < shapes[k]; i++)
                if (t[k][i] != (float) (i % 100 + k) * (round == 1 ? ranks / (float) w->workers : ranks)) {
                    w->ok = 0;
                    break;
                }
    }
    if (!w->ok)
        fprintf(stderr, "worker %d: %s\n", w->rank, zt_allreduce_error(ar));
    for (int k = 0; k < 3; k++)
        free(t[k]);
    zt_allreduce_destroy(&ar);
    return NULL;
}

static void s_ar_group(int workers, const char **reducers, int nreducers)
{
    char eps[4][64];
    const char *peers[4];
    for (int i = 0; i < workers; i++) {
        snprintf(eps[i], sizeof eps[i], "127.0.0.1:%d", zt_ephemeral_port());
        peers[i] = eps[i];
    }
    s_worker_t w[4];
    pthread_t t[4];
    for (int i = 0; i < workers; i++) {
        w[i] = (s_worker_t) { i, workers, nreducers, peers, reducers, 0 };
        pthread_create(&t[i], NULL, s_ar_worker, &w[i]);
    }
    for (int i = 0; i < workers; i++) {
        pthread_join(t[i], NULL);
        assert(w[i].ok);
    }
}

void zt_suite_allreduce(void)
{
    s_ar_group(3, NULL, 0); /* the ring */
}

static void *s_run_reducer(void *arg)
{
    zt_reducer_run(arg, s_should_stop, NULL);
    return NULL;
}

void zt_suite_ar_reducers(void)
{
    char eps[2][64];
    const char *reds[2];
    zt_reducer_t *r[2];
    pthread_t t[2];
    atomic_store(&s_servers_stop, 0);
    for (int i = 0; i < 2; i++) {
        int port = zt_ephemeral_port();
        snprintf(eps[i], sizeof eps[i], "127.0.0.1:%d", port);
        reds[i] = eps[i];
        char bind[80];
        snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", port);
        zt_reducer_opts_t o = { bind, i, 2, NULL };
        r[i] = zt_reducer_new(&o);
        assert(r[i]);
        pthread_create(&t[i], NULL, s_run_reducer, r[i]);
    }
    s_ar_group(3, reds, 2);
    atomic_store(&s_servers_stop, 1);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        zt_reducer_destroy(&r[i]);
    }
}

typedef struct {
    int rank;
    const char **peers;
    int ok;
} s_coll_worker_t;

static void *s_coll_worker(void *arg)
{
    s_coll_worker_t *w = arg;
    zt_allreduce_opts_t o = { w->rank, 2, NULL, 0, w->peers, 0, -1, 0, 0, 0 };
    char why[512];
    zt_coll_t *c = zt_coll_new(&o, 10000, why, sizeof why);
    assert(c && zt_coll_rank(c) == w->rank && zt_coll_size(c) == 2);
    int64_t n = 3 * zt_coll_slot_bytes(c) / 4 + 5; /* across slots */
    float *x = malloc((size_t) n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = (float) (w->rank + 1);
    w->ok = zt_coll_allreduce(c, x, n, false, 10000) == ZT_OK && x[0] == 3 && x[n - 1] == 3;
    char text[13];
    snprintf(text, sizeof text, "%s", w->rank == 1 ? "from rank 1!" : "............");
    w->ok = w->ok && zt_coll_broadcast(c, text, sizeof text, 1, 10000) == ZT_OK && !strcmp(text, "from rank 1!");
    /* calls that differ between the workers: refused by both, named */
    int rc = zt_coll_allreduce(c, x, w->rank == 0 ? 10 : 11, false, 10000);
    w->ok = w->ok && rc == ZT_EINVAL && strstr(zt_coll_error(c), "10") && strstr(zt_coll_error(c), "11");
    free(x);
    zt_coll_destroy(&c);
    return NULL;
}

void zt_suite_collective(void)
{
    char eps[2][64];
    const char *peers[2];
    for (int i = 0; i < 2; i++) {
        snprintf(eps[i], sizeof eps[i], "127.0.0.1:%d", zt_ephemeral_port());
        peers[i] = eps[i];
    }
    s_coll_worker_t w[2] = { { 0, peers, 0 }, { 1, peers, 0 } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, s_coll_worker, &w[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert(w[i].ok);
    }
}
