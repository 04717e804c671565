/* zt_machines: machine types, accelerator types, the accelerator count
 * compatibility table of AI Platform Training, and its scale tiers. */
#ifndef ZT_MACHINES_H
#define ZT_MACHINES_H
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char name[48];              /* as given, e.g. "n1-highcpu-16" or "complex_model_m_gpu" */
    char compute[48];           /* the Compute Engine type behind it */
    int vcpus;                  /* virtual CPUs */
    double memory_gb;           /* memory */
    const char *builtin_accel;  /* AI Platform's GPU types carry their GPUs, else NULL */
    int builtin_count;          /* how many */
} zt_machine_t;

typedef struct {
    const char *name;           /* BASIC, STANDARD_1, ... */
    const char *master;         /* machine of the master */
    int workers;                /* worker count */
    const char *worker;         /* worker machine */
    int ps;                     /* parameter server count */
    const char *ps_machine;     /* parameter server machine */
} zt_scale_tier_t;

/* Fills *out for a known machine type; false when unknown. */
bool zt_machine_lookup(const char *name, zt_machine_t *out);
/* Canonical accelerator name ("nvidia-tesla-t4" -> "NVIDIA_TESLA_T4") into
 * buf; returns true when it is a known type. */
bool zt_accel_canonical(const char *name, char *buf, size_t size);
/* Whether machine (a Compute Engine type) takes count accelerators of type;
 * allowed receives the allowed counts, "1, 2, 4", or "" when none. */
/* The GPUs an accelerator-optimized machine type (a2-, a3-, g2-) comes with:
 * the accelerator's name and *count; NULL for other types. */
const char *zt_machine_gpus(const char *machine, int *count);
bool zt_accel_allowed(const char *machine, const char *type, int count, char *allowed,
                      size_t size);
/* Comma-separated lists for messages. */
const char *zt_ml_names(void);
const char *zt_accel_names(void);
const char *zt_scale_tier_names(void);
const zt_scale_tier_t *zt_scale_tier_find(const char *name);
void zt_machines_selftest(void);

#endif
