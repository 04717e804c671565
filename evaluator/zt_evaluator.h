/* zt_evaluator: learns of each new checkpoint from the coordinator, pulls
 * it over ZeroMQ from the replica that serves it (no shared filesystem),
 * verifies it, evaluates loss and accuracy on the Fashion-MNIST test set and
 * reports them to the coordinator. */
#ifndef ZT_EVALUATOR_H
#define ZT_EVALUATOR_H

typedef struct {
    const char *data_dir;      /* test set directory */
    int test_limit;            /* first N test examples (0: all) */
} zt_evaluator_opts_t;

int zt_evaluator_run(const zt_evaluator_opts_t *o);

#endif
