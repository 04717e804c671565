#include "plan/zt_machines.h"
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Accelerator columns of the compatibility table. */
enum { K80, P4, P100, T4, V100, A100, A100_80, H100, L4, N_ACCEL };
static const char *s_accel[N_ACCEL] = {
    "NVIDIA_TESLA_K80", "NVIDIA_TESLA_P4", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_V100", "NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_H100_80GB", "NVIDIA_L4",
};

/* Allowed counts as bit sets: bit n set means count n is allowed. */
#define C(n) (1u << (n))
#define C124 (C(1) | C(2) | C(4))
#define C1248 (C(1) | C(2) | C(4) | C(8))
#define C248 (C(2) | C(4) | C(8))
typedef struct { const char *machines; unsigned counts[N_ACCEL]; } s_row_t;
/* AI Platform's table of the GPU counts valid per machine type; columns K80, P4,
 * P100, T4, V100, A100; then the newer a2-ultra, a3 and g2 families. */
static const s_row_t s_table[] = {
    { "n1-standard-4 n1-standard-8 n1-highmem-2 n1-highmem-4 n1-highmem-8",
      { C1248, C124, C124, C124, C1248 } },
    { "n1-standard-16 n1-highmem-16 n1-highcpu-16", { C248, C124, C124, C124, C248 } },
    { "n1-standard-32 n1-highmem-32 n1-highcpu-32",
      { C(4) | C(8), C(2) | C(4), C(2) | C(4), C(2) | C(4), C(4) | C(8) } },
    { "n1-standard-64 n1-standard-96 n1-highmem-64 n1-highmem-96 n1-highcpu-96",
      { 0, C(4), 0, C(4), C(8) } },
    { "n1-highcpu-64", { C(8), C(4), C(4), C(4), C(8) } },
    { "a2-highgpu-1g", { [A100] = C(1) } },
    { "a2-highgpu-2g", { [A100] = C(2) } },
    { "a2-highgpu-4g", { [A100] = C(4) } },
    { "a2-highgpu-8g", { [A100] = C(8) } },
    { "a2-megagpu-16g", { [A100] = C(16) } },
    { "a2-ultragpu-1g", { [A100_80] = C(1) } },
    { "a2-ultragpu-2g", { [A100_80] = C(2) } },
    { "a2-ultragpu-4g", { [A100_80] = C(4) } },
    { "a2-ultragpu-8g", { [A100_80] = C(8) } },
    { "a3-highgpu-1g", { [H100] = C(1) } },
    { "a3-highgpu-2g", { [H100] = C(2) } },
    { "a3-highgpu-4g", { [H100] = C(4) } },
    { "a3-highgpu-8g", { [H100] = C(8) } },
    { "g2-standard-4 g2-standard-8 g2-standard-12 g2-standard-16 g2-standard-32",
      { [L4] = C(1) } },
    { "g2-standard-24", { [L4] = C(2) } },
    { "g2-standard-48", { [L4] = C(4) } },
    { "g2-standard-96", { [L4] = C(8) } },
};

/* General-purpose families: name prefix, sizes, GB of memory per vCPU. */
typedef struct { const char *prefix; int sizes[10]; double gb_per_cpu; } s_family_t;
static const s_family_t s_families[] = {
    { "n1-standard-", { 1, 2, 4, 8, 16, 32, 64, 96 }, 3.75 },
    { "n1-highmem-", { 2, 4, 8, 16, 32, 64, 96 }, 6.5 },
    { "n1-highcpu-", { 2, 4, 8, 16, 32, 64, 96 }, 0.9 },
    { "n2-standard-", { 2, 4, 8, 16, 32, 48, 64, 80, 96, 128 }, 4 },
    { "n2-highmem-", { 2, 4, 8, 16, 32, 48, 64, 80, 96, 128 }, 8 },
    { "n2-highcpu-", { 2, 4, 8, 16, 32, 48, 64, 80, 96 }, 1 },
    { "e2-standard-", { 2, 4, 8, 16, 32 }, 4 },
    { "e2-highmem-", { 2, 4, 8, 16 }, 8 },
    { "e2-highcpu-", { 2, 4, 8, 16, 32 }, 1 },
    { "c2-standard-", { 4, 8, 16, 30, 60 }, 4 },
    { "g2-standard-", { 4, 8, 12, 16, 24, 32, 48, 96 }, 4 },
};

/* GPU families: name, vCPUs, memory. */
typedef struct { const char *name; int vcpus; double gb; } s_gpu_machine_t;
static const s_gpu_machine_t s_gpu_machines[] = {
    { "a2-highgpu-1g", 12, 85 },   { "a2-highgpu-2g", 24, 170 },  { "a2-highgpu-4g", 48, 340 },
    { "a2-highgpu-8g", 96, 680 },  { "a2-megagpu-16g", 96, 1360 },
    { "a2-ultragpu-1g", 12, 170 }, { "a2-ultragpu-2g", 24, 340 }, { "a2-ultragpu-4g", 48, 680 },
    { "a2-ultragpu-8g", 96, 1360 },
    { "a3-highgpu-1g", 26, 234 },  { "a3-highgpu-2g", 52, 468 },  { "a3-highgpu-4g", 104, 936 },
    { "a3-highgpu-8g", 208, 1872 },
};

/* AI Platform Training's machine names. */
typedef struct { const char *name, *compute; int accel; int count; } s_ai_platform_t;
static const s_ai_platform_t s_ai_platform[] = {
    { "standard", "n1-standard-4", -1, 0 },        { "large_model", "n1-highmem-8", -1, 0 },
    { "complex_model_s", "n1-highcpu-8", -1, 0 },  { "complex_model_m", "n1-highcpu-16", -1, 0 },
    { "complex_model_l", "n1-highcpu-32", -1, 0 }, { "standard_gpu", "n1-standard-8", K80, 1 },
    { "complex_model_m_gpu", "n1-standard-16", K80, 4 },
    { "complex_model_l_gpu", "n1-standard-32", K80, 8 },
    { "standard_p100", "n1-standard-8", P100, 1 },
    { "complex_model_m_p100", "n1-standard-16", P100, 4 },
    { "standard_v100", "n1-standard-8", V100, 1 },  { "large_model_v100", "n1-highmem-8", V100, 1 },
    { "complex_model_m_v100", "n1-standard-16", V100, 4 },
    { "complex_model_l_v100", "n1-standard-32", V100, 8 },
};

/* SageMaker's ml.* instance types: vCPUs, memory (GiB) and the GPUs they
 * come with (a name, or NULL). */
typedef struct { const char *name; int vcpus; double gb; const char *gpu; int gpus; } s_ml_t;
static const s_ml_t s_ml[] = {
    { "ml.m5.large", 2, 8, NULL, 0 },           { "ml.m5.xlarge", 4, 16, NULL, 0 },
    { "ml.m5.2xlarge", 8, 32, NULL, 0 },        { "ml.m5.4xlarge", 16, 64, NULL, 0 },
    { "ml.m5.12xlarge", 48, 192, NULL, 0 },     { "ml.m5.24xlarge", 96, 384, NULL, 0 },
    { "ml.m6i.xlarge", 4, 16, NULL, 0 },        { "ml.m6i.2xlarge", 8, 32, NULL, 0 },
    { "ml.m6i.4xlarge", 16, 64, NULL, 0 },      { "ml.c5.xlarge", 4, 8, NULL, 0 },
    { "ml.c5.2xlarge", 8, 16, NULL, 0 },        { "ml.c5.4xlarge", 16, 32, NULL, 0 },
    { "ml.c5.9xlarge", 36, 72, NULL, 0 },       { "ml.c5.18xlarge", 72, 144, NULL, 0 },
    { "ml.r5.xlarge", 4, 32, NULL, 0 },         { "ml.r5.2xlarge", 8, 64, NULL, 0 },
    { "ml.p2.xlarge", 4, 61, "NVIDIA_TESLA_K80", 1 },
    { "ml.p2.8xlarge", 32, 488, "NVIDIA_TESLA_K80", 8 },
    { "ml.p3.2xlarge", 8, 61, "NVIDIA_TESLA_V100", 1 },
    { "ml.p3.8xlarge", 32, 244, "NVIDIA_TESLA_V100", 4 },
    { "ml.p3.16xlarge", 64, 488, "NVIDIA_TESLA_V100", 8 },
    { "ml.p4d.24xlarge", 96, 1152, "NVIDIA_TESLA_A100", 8 },
    { "ml.p4de.24xlarge", 96, 1152, "NVIDIA_A100_80GB", 8 },
    { "ml.p5.48xlarge", 192, 2048, "NVIDIA_H100_80GB", 8 },
    { "ml.g4dn.xlarge", 4, 16, "NVIDIA_TESLA_T4", 1 },
    { "ml.g4dn.2xlarge", 8, 32, "NVIDIA_TESLA_T4", 1 },
    { "ml.g4dn.12xlarge", 48, 192, "NVIDIA_TESLA_T4", 4 },
    { "ml.g5.xlarge", 4, 16, "NVIDIA_A10G", 1 },
    { "ml.g5.2xlarge", 8, 32, "NVIDIA_A10G", 1 },
    { "ml.g5.12xlarge", 48, 192, "NVIDIA_A10G", 4 },
    { "ml.g5.48xlarge", 192, 768, "NVIDIA_A10G", 8 },
    { "ml.g6.xlarge", 4, 16, "NVIDIA_L4", 1 },
    { "ml.g6.12xlarge", 48, 192, "NVIDIA_L4", 4 },
};

const char *zt_ml_names(void)
{
    static char names[2048];
    if (!names[0])
        for (size_t i = 0; i < sizeof s_ml / sizeof *s_ml; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", s_ml[i].name);
    return names;
}

static const zt_scale_tier_t s_tiers[] = {
    { "BASIC", "n1-standard-4", 0, NULL, 0, NULL },
    { "STANDARD_1", "n1-highcpu-8", 4, "n1-highcpu-8", 3, "n1-standard-4" },
    { "PREMIUM_1", "n1-highcpu-16", 19, "n1-highcpu-16", 11, "n1-highmem-8" },
    { "BASIC_GPU", "standard_gpu", 0, NULL, 0, NULL },
    { "CUSTOM", NULL, 0, NULL, 0, NULL },
};

static bool s_compute_lookup(const char *name, zt_machine_t *out)
{
    for (size_t i = 0; i < sizeof s_gpu_machines / sizeof *s_gpu_machines; i++)
        if (!strcmp(name, s_gpu_machines[i].name)) {
            out->vcpus = s_gpu_machines[i].vcpus;
            out->memory_gb = s_gpu_machines[i].gb;
            return true;
        }
    for (size_t f = 0; f < sizeof s_families / sizeof *s_families; f++) {
        size_t plen = strlen(s_families[f].prefix);
        if (strncmp(name, s_families[f].prefix, plen))
            continue;
        char *end;
        long n = strtol(name + plen, &end, 10);
        if (*end || end == name + plen)
            return false;
        for (int s = 0; s < 10 && s_families[f].sizes[s]; s++)
            if (s_families[f].sizes[s] == n) {
                out->vcpus = (int) n;
                out->memory_gb = n * s_families[f].gb_per_cpu;
                return true;
            }
    }
    return false;
}

bool zt_machine_lookup(const char *name, zt_machine_t *out)
{
    memset(out, 0, sizeof *out);
    if (!name || strlen(name) >= sizeof out->name)
        return false;
    snprintf(out->name, sizeof out->name, "%s", name);
    for (size_t i = 0; i < sizeof s_ml / sizeof *s_ml; i++)
        if (!strcmp(name, s_ml[i].name)) { /* no Compute Engine type behind it */
            out->vcpus = s_ml[i].vcpus;
            out->memory_gb = s_ml[i].gb;
            out->builtin_accel = s_ml[i].gpu;
            out->builtin_count = s_ml[i].gpus;
            return true;
        }
    for (size_t i = 0; i < sizeof s_ai_platform / sizeof *s_ai_platform; i++)
        if (!strcmp(name, s_ai_platform[i].name)) {
            snprintf(out->compute, sizeof out->compute, "%s", s_ai_platform[i].compute);
            if (s_ai_platform[i].accel >= 0) {
                out->builtin_accel = s_accel[s_ai_platform[i].accel];
                out->builtin_count = s_ai_platform[i].count;
            }
            return s_compute_lookup(s_ai_platform[i].compute, out);
        }
    snprintf(out->compute, sizeof out->compute, "%s", name);
    return s_compute_lookup(name, out);
}

static int s_accel_index(const char *canonical)
{
    for (int i = 0; i < N_ACCEL; i++)
        if (!strcmp(canonical, s_accel[i]))
            return i;
    return -1;
}

bool zt_accel_canonical(const char *name, char *buf, size_t size)
{
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++)
        buf[i] = name[i] == '-' ? '_' : (char) toupper((unsigned char) name[i]);
    buf[i] = 0;
    return s_accel_index(buf) >= 0;
}

static bool s_row_has(const char *machines, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = machines; (p = strstr(p, name)); p += n)
        if ((p == machines || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return true;
    return false;
}

bool zt_accel_allowed(const char *machine, const char *type, int count, char *allowed, size_t size)
{
    allowed[0] = 0;
    int col = s_accel_index(type);
    unsigned set = 0;
    for (size_t r = 0; col >= 0 && r < sizeof s_table / sizeof *s_table; r++)
        if (s_row_has(s_table[r].machines, machine))
            set = s_table[r].counts[col];
    size_t len = 0;
    for (int n = 1; n <= 16; n++)
        if (set & C(n))
            len += (size_t) snprintf(allowed + len, len < size ? size - len : 0, "%s%d",
                                     len ? ", " : "", n);
    return count >= 0 && count <= 16 && (set & C(count));
}

const char *zt_machine_gpus(const char *machine, int *count)
{
    if (strncmp(machine, "a2-", 3) && strncmp(machine, "a3-", 3) && strncmp(machine, "g2-", 3))
        return NULL; /* the accelerator-optimized families come with their GPUs */
    for (size_t r = 0; r < sizeof s_table / sizeof *s_table; r++)
        if (s_row_has(s_table[r].machines, machine))
            for (int col = 0; col < N_ACCEL; col++)
                for (int n = 1; n <= 16; n++)
                    if (s_table[r].counts[col] & C(n)) {
                        *count = n;
                        return s_accel[col];
                    }
    return NULL;
}

const char *zt_accel_names(void)
{
    static char buf[512];
    if (!buf[0])
        for (int i = 0; i < N_ACCEL; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "", s_accel[i]);
    return buf;
}

const char *zt_scale_tier_names(void)
{
    return "BASIC, STANDARD_1, PREMIUM_1, BASIC_GPU, CUSTOM";
}

const zt_scale_tier_t *zt_scale_tier_find(const char *name)
{
    for (size_t i = 0; i < sizeof s_tiers / sizeof *s_tiers; i++)
        if (!strcmp(name, s_tiers[i].name))
            return &s_tiers[i];
    return NULL;
}

void zt_machines_selftest(void)
{
    zt_machine_t m;
    char buf[64], allowed[64];
    assert(zt_machine_lookup("n1-highcpu-16", &m) && m.vcpus == 16);
    assert(zt_machine_lookup("complex_model_m_gpu", &m) && m.builtin_count == 4 &&
           !strcmp(m.compute, "n1-standard-16"));
    assert(!zt_machine_lookup("n1-standard-3", &m));
    assert(!zt_machine_lookup("n9-mega-1", &m));
    assert(zt_accel_canonical("nvidia-tesla-t4", buf, sizeof buf) && !strcmp(buf, "NVIDIA_TESLA_T4"));
    assert(!zt_accel_canonical("TPU_V3", buf, sizeof buf));
    assert(!zt_accel_allowed("n1-standard-4", "NVIDIA_TESLA_T4", 3, allowed, sizeof allowed));
    assert(!strcmp(allowed, "1, 2, 4"));
    assert(zt_accel_allowed("n1-highmem-96", "NVIDIA_TESLA_V100", 8, allowed, sizeof allowed));
    assert(!zt_accel_allowed("n1-standard-8", "NVIDIA_TESLA_A100", 1, allowed, sizeof allowed));
    assert(zt_accel_allowed("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2, allowed, sizeof allowed));
    assert(!zt_accel_allowed("a2-highgpu-2g", "NVIDIA_TESLA_A100", 1, allowed, sizeof allowed));
    assert(!zt_accel_allowed("n1-highcpu-8", "NVIDIA_TESLA_T4", 1, allowed, sizeof allowed) &&
           !allowed[0]);
    assert(zt_scale_tier_find("PREMIUM_1")->ps == 11 && !zt_scale_tier_find("premium"));
    int n = 0;
    assert(!strcmp(zt_machine_gpus("a3-highgpu-2g", &n), "NVIDIA_H100_80GB") && n == 2);
    assert(!strcmp(zt_machine_gpus("g2-standard-24", &n), "NVIDIA_L4") && n == 2);
    assert(!zt_machine_gpus("n1-standard-8", &n));
}
