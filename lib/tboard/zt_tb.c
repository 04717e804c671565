/* TensorBoard event files (see zt_tb.h). */
#include "tboard/zt_tb.h"
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include "ztrain/zt_log.h"
#include "base/zt_util.h"
#include "base/zt_env.h"
#include "ztrain/zt_knobs.h"
#include "zt_tb.pb-c.h"

struct zt_tb {
    FILE *f;
    char *path;
    bool failed;
};

/* ------------------------------------------------------------ CRC32C */

/* Castagnoli's polynomial, reflected; a table built on first use. */
static uint32_t s_table[256];

static void s_make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        s_table[i] = c;
    }
}

uint32_t zt_tb_crc32c(const void *data, size_t n)
{
    if (!s_table[1])
        s_make_table();
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++)
        c = s_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t zt_tb_masked_crc(const void *data, size_t n)
{
    uint32_t c = zt_tb_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ------------------------------------------------------------ records */

static double s_wall(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double) tv.tv_sec + (double) tv.tv_usec / 1e6;
}

static void s_le64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char) (v >> (8 * i));
}

static void s_le32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char) (v >> (8 * i));
}

static int s_write_event(zt_tb_t *self, const Zttb__Event *ev)
{
    if (self->failed)
        return -1;
    size_t n = zttb__event__get_packed_size(ev);
    unsigned char *buf = malloc(n + 16);
    s_le64(buf, n);
    s_le32(buf + 8, zt_tb_masked_crc(buf, 8));
    zttb__event__pack(ev, buf + 12);
    s_le32(buf + 12 + n, zt_tb_masked_crc(buf + 12, n));
    bool ok = fwrite(buf, 1, n + 16, self->f) == n + 16 && fflush(self->f) == 0;
    free(buf);
    if (!ok) {
        zt_warn("TensorBoard events %s: %s; no more points are written there", self->path, strerror(errno));
        self->failed = true;
        return -1;
    }
    return 0;
}

zt_tb_t *zt_tb_open(const char *dir, char *err, size_t errlen)
{
    static int seq;
    if (zt_mkdir_p(dir) != 0) {
        snprintf(err, errlen, "TensorBoard log folder %s: cannot make it: %s", dir, strerror(errno));
        return NULL;
    }
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    zt_tb_t *self = calloc(1, sizeof *self);
    self->path = zt_strdupf("%s/events.out.tfevents.%lld.%s.%d.%d", dir, (long long) s_wall(), host,
                            (int) getpid(), seq++);
    self->f = fopen(self->path, "wbx");
    if (!self->f) {
        snprintf(err, errlen, "TensorBoard event file %s: %s", self->path, strerror(errno));
        free(self->path);
        free(self);
        return NULL;
    }
    Zttb__Event ev = ZTTB__EVENT__INIT;
    ev.wall_time = s_wall();
    ev.what_case = ZTTB__EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if (s_write_event(self, &ev) != 0) {
        snprintf(err, errlen, "TensorBoard event file %s: %s", self->path, strerror(errno));
        zt_tb_close(&self);
        return NULL;
    }
    return self;
}

char *zt_tb_run_dir(const char *base, const char *run)
{
    size_t n = strlen(base);
    while (n > 1 && base[n - 1] == '/')
        n--;
    return zt_strdupf("%.*s/%s", (int) n, base, run);
}

zt_tb_t *zt_tb_open_role_run(const char *run)
{
    const char *base = zt_env_get(ZT_ENV_AIP_TENSORBOARD_LOG_DIR);
    if (!base || !*base || !strcmp(zt_knob_str(ZT_KNOB_TENSORBOARD), "off"))
        return NULL;
    char *dir = zt_tb_run_dir(base, run), err[600];
    zt_tb_t *tb = zt_tb_open(dir, err, sizeof err);
    if (!tb)
        zt_warn("%s: no TensorBoard scalars (ZT_TENSORBOARD=off turns them off)", err);
    free(dir);
    return tb;
}

const char *zt_tb_path(const zt_tb_t *self)
{
    return self->path;
}

void zt_tb_close(zt_tb_t **self_p)
{
    zt_tb_t *self = *self_p;
    if (!self)
        return;
    if (self->f)
        fclose(self->f);
    free(self->path);
    free(self);
    *self_p = NULL;
}

/* One summary value in an event at step. */
static int s_write_value(zt_tb_t *self, Zttb__SummaryValue *v, int64_t step)
{
    Zttb__SummaryValue *vals[1] = { v };
    Zttb__Summary sum = ZTTB__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = vals;
    Zttb__Event ev = ZTTB__EVENT__INIT;
    ev.wall_time = s_wall();
    ev.step = step;
    ev.what_case = ZTTB__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return s_write_event(self, &ev);
}

int zt_tb_scalar(zt_tb_t *self, const char *tag, double value, int64_t step)
{
    if (!self)
        return -1;
    Zttb__SummaryValue v = ZTTB__SUMMARY_VALUE__INIT;
    v.tag = (char *) tag;
    v.value_case = ZTTB__SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float) value;
    return s_write_value(self, &v, step);
}

/* ------------------------------------------------------------ HParams */

/* The plugin's record: tag, and the HParamsPluginData as the metadata's
 * content (version 0), with no value. */
static int s_write_hparams(zt_tb_t *self, const char *tag, Zttb__HParamsPluginData *pd)
{
    size_t n = zttb__hparams_plugin_data__get_packed_size(pd);
    uint8_t *content = malloc(n ? n : 1);
    zttb__hparams_plugin_data__pack(pd, content);
    Zttb__PluginData plug = ZTTB__PLUGIN_DATA__INIT;
    plug.plugin_name = "hparams";
    plug.content = (ProtobufCBinaryData) { n, content };
    Zttb__SummaryMetadata md = ZTTB__SUMMARY_METADATA__INIT;
    md.plugin_data = &plug;
    Zttb__SummaryValue v = ZTTB__SUMMARY_VALUE__INIT;
    v.tag = (char *) tag;
    v.metadata = &md;
    int rc = s_write_value(self, &v, 0);
    free(content);
    return rc;
}

static void s_value(Zttb__Value *v, zt_tb_kind_t kind, double number, const char *string)
{
    zttb__value__init(v);
    if (kind == ZT_TB_STRING) {
        v->kind_case = ZTTB__VALUE__KIND_STRING_VALUE;
        v->string_value = (char *) (string ? string : "");
    }
    else if (kind == ZT_TB_BOOL) {
        v->kind_case = ZTTB__VALUE__KIND_BOOL_VALUE;
        v->bool_value = number != 0;
    }
    else {
        v->kind_case = ZTTB__VALUE__KIND_NUMBER_VALUE;
        v->number_value = number;
    }
}

int zt_tb_experiment(zt_tb_t *self, const char *name, const char *description, const zt_tb_hparam_t *hp,
                     int nhp, const char *const *metric_tags, int nmetrics, double created_secs)
{
    if (!self)
        return -1;
    Zttb__HParamInfo *infos = calloc((size_t) nhp + 1, sizeof *infos);
    Zttb__HParamInfo **pinfos = calloc((size_t) nhp + 1, sizeof *pinfos);
    Zttb__ListValue *lists = calloc((size_t) nhp + 1, sizeof *lists);
    Zttb__Interval *ivals = calloc((size_t) nhp + 1, sizeof *ivals);
    int ndisc = 0;
    for (int i = 0; i < nhp; i++)
        ndisc += hp[i].ndiscrete;
    Zttb__Value *dv = calloc((size_t) ndisc + 1, sizeof *dv);
    Zttb__Value **pdv = calloc((size_t) ndisc + 1, sizeof *pdv);
    for (int i = 0, d = 0; i < nhp; i++) {
        Zttb__HParamInfo *h = &infos[i];
        zttb__hparam_info__init(h);
        h->name = (char *) hp[i].name;
        h->type = hp[i].kind == ZT_TB_STRING ? ZTTB__DATA_TYPE__DATA_TYPE_STRING
                  : hp[i].kind == ZT_TB_BOOL ? ZTTB__DATA_TYPE__DATA_TYPE_BOOL
                                             : ZTTB__DATA_TYPE__DATA_TYPE_FLOAT64;
        if (hp[i].ndiscrete > 0) {
            zttb__list_value__init(&lists[i]);
            lists[i].values = &pdv[d];
            lists[i].n_values = (size_t) hp[i].ndiscrete;
            for (int k = 0; k < hp[i].ndiscrete; k++, d++) {
                pdv[d] = &dv[d];
                s_value(&dv[d], hp[i].kind, hp[i].discrete_numbers ? hp[i].discrete_numbers[k] : 0,
                        hp[i].discrete_strings ? hp[i].discrete_strings[k] : NULL);
            }
            h->domain_case = ZTTB__HPARAM_INFO__DOMAIN_DOMAIN_DISCRETE;
            h->domain_discrete = &lists[i];
        }
        else if (hp[i].kind == ZT_TB_NUMBER && hp[i].min < hp[i].max) {
            zttb__interval__init(&ivals[i]);
            ivals[i].min_value = hp[i].min;
            ivals[i].max_value = hp[i].max;
            h->domain_case = ZTTB__HPARAM_INFO__DOMAIN_DOMAIN_INTERVAL;
            h->domain_interval = &ivals[i];
        }
        pinfos[i] = h;
    }
    Zttb__MetricInfo *mi = calloc((size_t) nmetrics + 1, sizeof *mi);
    Zttb__MetricInfo **pmi = calloc((size_t) nmetrics + 1, sizeof *pmi);
    Zttb__MetricName *mn = calloc((size_t) nmetrics + 1, sizeof *mn);
    for (int i = 0; i < nmetrics; i++) {
        zttb__metric_info__init(&mi[i]);
        zttb__metric_name__init(&mn[i]);
        mn[i].tag = (char *) metric_tags[i];
        mi[i].name = &mn[i];
        pmi[i] = &mi[i];
    }
    Zttb__Experiment ex = ZTTB__EXPERIMENT__INIT;
    ex.name = (char *) (name ? name : "");
    ex.description = (char *) (description ? description : "");
    ex.time_created_secs = created_secs;
    ex.n_hparam_infos = (size_t) nhp;
    ex.hparam_infos = pinfos;
    ex.n_metric_infos = (size_t) nmetrics;
    ex.metric_infos = pmi;
    Zttb__HParamsPluginData pd = ZTTB__HPARAMS_PLUGIN_DATA__INIT;
    pd.data_case = ZTTB__HPARAMS_PLUGIN_DATA__DATA_EXPERIMENT;
    pd.experiment = &ex;
    int rc = s_write_hparams(self, "_hparams_/experiment", &pd);
    free(infos), free(pinfos), free(lists), free(ivals), free(dv), free(pdv), free(mi), free(pmi), free(mn);
    return rc;
}

int zt_tb_session_start(zt_tb_t *self, const zt_tb_hparam_t *hp, int nhp, const char *group, double start_secs)
{
    if (!self)
        return -1;
    Zttb__SessionStartInfo__HparamsEntry *ents = calloc((size_t) nhp + 1, sizeof *ents);
    Zttb__SessionStartInfo__HparamsEntry **pents = calloc((size_t) nhp + 1, sizeof *pents);
    Zttb__Value *vals = calloc((size_t) nhp + 1, sizeof *vals);
    for (int i = 0; i < nhp; i++) {
        zttb__session_start_info__hparams_entry__init(&ents[i]);
        s_value(&vals[i], hp[i].kind, hp[i].number, hp[i].string);
        ents[i].key = (char *) hp[i].name;
        ents[i].value = &vals[i];
        pents[i] = &ents[i];
    }
    Zttb__SessionStartInfo si = ZTTB__SESSION_START_INFO__INIT;
    si.n_hparams = (size_t) nhp;
    si.hparams = pents;
    si.group_name = (char *) (group ? group : "");
    si.start_time_secs = start_secs;
    Zttb__HParamsPluginData pd = ZTTB__HPARAMS_PLUGIN_DATA__INIT;
    pd.data_case = ZTTB__HPARAMS_PLUGIN_DATA__DATA_SESSION_START_INFO;
    pd.session_start_info = &si;
    int rc = s_write_hparams(self, "_hparams_/session_start_info", &pd);
    free(ents), free(pents), free(vals);
    return rc;
}

int zt_tb_session_end(zt_tb_t *self, zt_tb_status_t status, double end_secs)
{
    if (!self)
        return -1;
    Zttb__SessionEndInfo ei = ZTTB__SESSION_END_INFO__INIT;
    ei.status = (Zttb__Status) status;
    ei.end_time_secs = end_secs;
    Zttb__HParamsPluginData pd = ZTTB__HPARAMS_PLUGIN_DATA__INIT;
    pd.data_case = ZTTB__HPARAMS_PLUGIN_DATA__DATA_SESSION_END_INFO;
    pd.session_end_info = &ei;
    return s_write_hparams(self, "_hparams_/session_end_info", &pd);
}

/* ------------------------------------------------------------ selftest */

void zt_tb_selftest(const char *tmp)
{
    /* CRC32C's check value, and the masked CRC of TFRecord's known header */
    assert(zt_tb_crc32c("123456789", 9) == 0xe3069283u);
    assert(zt_tb_crc32c("", 0) == 0);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/zt-tb-selftest-%d/run", tmp, (int) getpid());
    char err[512];
    zt_tb_t *tb = zt_tb_open(dir, err, sizeof err);
    assert(tb);
    assert(zt_tb_scalar(tb, "loss", 0.5, 7) == 0);
    char *path = strdup(zt_tb_path(tb));
    zt_tb_close(&tb);
    assert(!tb);
    /* read the records back: lengths and CRCs hold, the second event has step 7 */
    size_t len;
    unsigned char *b = (unsigned char *) zt_read_file(path, &len);
    assert(b);
    size_t at = 0;
    int events = 0;
    while (at + 12 <= len) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | b[at + i];
        uint32_t c1 = (uint32_t) b[at + 8] | (uint32_t) b[at + 9] << 8 | (uint32_t) b[at + 10] << 16 |
                      (uint32_t) b[at + 11] << 24;
        assert(c1 == zt_tb_masked_crc(b + at, 8));
        assert(at + 16 + n <= len);
        Zttb__Event *ev = zttb__event__unpack(NULL, n, b + at + 12);
        assert(ev);
        if (events == 0)
            assert(ev->what_case == ZTTB__EVENT__WHAT_FILE_VERSION && !strcmp(ev->file_version, "brain.Event:2"));
        else
            assert(ev->step == 7 && ev->summary->n_value == 1 && !strcmp(ev->summary->value[0]->tag, "loss") &&
                   ev->summary->value[0]->simple_value == 0.5f);
        zttb__event__free_unpacked(ev, NULL);
        at += 16 + n;
        events++;
    }
    assert(at == len && events == 2);
    free(b);
    /* a folder that cannot be made: NULL and a reason naming it */
    assert(!zt_tb_open("/proc/zt-no-such/run", err, sizeof err) && strstr(err, "/proc/zt-no-such/run"));
    char *j = zt_tb_run_dir("/a/logs//", "train");
    assert(!strcmp(j, "/a/logs/train"));
    free(j);
    char *top = zt_strdupf("%s/zt-tb-selftest-%d", tmp, (int) getpid());
    zt_rm_tree(top);
    free(top);
    free(path);
}
