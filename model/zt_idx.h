/* zt_idx: the gzipped IDX files of (Fashion-)MNIST. */
#ifndef ZT_IDX_H
#define ZT_IDX_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int n;              /* examples */
    int dim;            /* features per example (rows * cols) */
    uint8_t *x;         /* n * dim pixels */
    uint8_t *y;         /* n labels */
} zt_dataset_t;

/* Loads PREFIX-images-idx3-ubyte.gz and PREFIX-labels-idx1-ubyte.gz from dir
 * ("train" or "t10k"); limit > 0 keeps the first `limit` examples. 0 or an
 * error with the reason (naming the file) in err. */
int zt_dataset_load(const char *dir, const char *prefix, int limit, zt_dataset_t *out,
                    char *err, size_t errlen);
void zt_dataset_free(zt_dataset_t *ds);
/* Default directory: $ZT_DATA_DIR, else Debian's /usr/share/datasets/fashion-mnist. */
const char *zt_dataset_default_dir(void);

#endif
