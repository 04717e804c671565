#include "zt_idx.h"
#include "base/zt_util.h"
#include "ztrain/zt_error.h"
#include "ztrain/zt_knobs.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

const char *zt_dataset_default_dir(void)
{
    return zt_knob_str(ZT_KNOB_DATA_DIR);
}

static uint32_t s_be32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

/* Reads an IDX file: magic, dims; the payload into *data (count bytes). */
static int s_read_idx(const char *path, uint32_t magic, uint32_t *dims, int ndims, uint8_t **data,
                      size_t *count, int limit, char *err, size_t errlen)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s (install Debian's dataset-fashion-mnist, or set ZT_DATA_DIR "
                 "or --data_dir)", path, strerror(errno ? errno : ENOENT));
        return ZT_ENOTFOUND;
    }
    uint8_t head[16];
    int hn = 4 + 4 * ndims;
    if (gzread(f, head, (unsigned) hn) != hn || s_be32(head) != magic) {
        snprintf(err, errlen, "%s: not an IDX file with magic %u", path, magic);
        gzclose(f);
        return ZT_EIO;
    }
    size_t total = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = s_be32(head + 4 + 4 * i);
        if (i == 0 && limit > 0 && dims[0] > (uint32_t) limit)
            dims[0] = (uint32_t) limit;
        total *= dims[i];
    }
    if (total == 0 || total > ((size_t) 1 << 32)) {
        snprintf(err, errlen, "%s: implausible dimensions", path);
        gzclose(f);
        return ZT_EIO;
    }
    *data = malloc(total);
    size_t got = 0;
    while (*data && got < total) {
        unsigned part = total - got > (1u << 30) ? (1u << 30) : (unsigned) (total - got);
        int n = gzread(f, *data + got, part);
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    gzclose(f);
    if (got != total) {
        snprintf(err, errlen, "%s: truncated (%zu of %zu bytes)", path, got, total);
        free(*data);
        *data = NULL;
        return ZT_EIO;
    }
    *count = total;
    return ZT_OK;
}

int zt_dataset_load(const char *dir, const char *prefix, int limit, zt_dataset_t *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *ip = zt_strdupf("%s/%s-images-idx3-ubyte.gz", dir, prefix);
    char *lp = zt_strdupf("%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    uint32_t idims[3], ldims[1];
    size_t ni, nl;
    int rc = s_read_idx(ip, 2051, idims, 3, &out->x, &ni, limit, err, errlen);
    if (rc == ZT_OK)
        rc = s_read_idx(lp, 2049, ldims, 1, &out->y, &nl, limit, err, errlen);
    if (rc == ZT_OK && idims[0] != ldims[0]) {
        snprintf(err, errlen, "%s and %s: %u images but %u labels", ip, lp, idims[0], ldims[0]);
        rc = ZT_EIO;
    }
    if (rc == ZT_OK)
        for (size_t i = 0; i < nl; i++)
            if (out->y[i] > 9) {
                snprintf(err, errlen, "%s: label %u at %zu is not 0..9", lp, out->y[i], i);
                rc = ZT_EIO;
                break;
            }
    if (rc == ZT_OK) {
        out->n = (int) idims[0];
        out->dim = (int) (idims[1] * idims[2]);
    }
    else
        zt_dataset_free(out);
    free(ip);
    free(lp);
    return rc;
}

void zt_dataset_free(zt_dataset_t *ds)
{
    free(ds->x);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
}
