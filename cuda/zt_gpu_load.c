/* zt_gpu.h for the trainer: the CUDA module (libztgpu.so, which maps CUDA,
 * cuBLAS and NCCL) is dlopen-ed on the first call, so that a replica that
 * uses no GPU never maps them. Where the module is: ZT_GPU_MODULE, else
 * lib/ztrain/ (or the install's library folder) beside the binary's bin/.
 * Without it (a build without CUDA, a missing CUDA runtime) there are no
 * devices, and the calls that make a model fail saying why. */
#include "zt_gpu_api.h"
#include "base/zt_util.h"
#include "ztrain/zt_knobs.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef ZT_INSTALL_LIBDIR
#define ZT_INSTALL_LIBDIR "lib"
#endif

static const zt_gpu_api_t *s_api;
static char s_why[2048];
static pthread_once_t s_once = PTHREAD_ONCE_INIT;

#ifdef ZT_HAVE_CUDA
static void *s_open(const char *path, char *err, size_t len)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, len, "%s", e ? e : path);
    }
    return h;
}
#endif

static void s_load(void)
{
#ifndef ZT_HAVE_CUDA
    snprintf(s_why, sizeof s_why, "this ztrain was built without CUDA (the toolkit was not found at build "
             "time); rebuild with the CUDA toolkit (ZT_WITH_CUDA=ON) or run with --cpu-only");
#else
    char err[1536] = "", path[1024];
    void *h = NULL;
    const char *given = zt_knob_str(ZT_KNOB_GPU_MODULE);
    if (given && *given) {
        snprintf(path, sizeof path, "%s", given);
        h = s_open(path, err, sizeof err);
    }
    else {
        const char *dirs[] = { "lib/ztrain", ZT_INSTALL_LIBDIR "/ztrain" };
        for (size_t i = 0; i < sizeof dirs / sizeof *dirs && !h && !err[0]; i++) {
            snprintf(path, sizeof path, "%s/../%s/libztgpu.so", zt_exe_dir(), dirs[i]);
            if (access(path, F_OK) == 0)
                h = s_open(path, err, sizeof err);
        }
        if (!h && !err[0])
            snprintf(err, sizeof err, "no libztgpu.so in %s/../lib/ztrain or %s/../%s/ztrain", zt_exe_dir(),
                     zt_exe_dir(), ZT_INSTALL_LIBDIR);
    }
    if (!h) {
        snprintf(s_why, sizeof s_why, "cannot load ztrain's CUDA module: %s; install the CUDA runtime, "
                 "cuBLAS and NCCL it was built with, set ZT_GPU_MODULE to the module, or run with "
                 "--cpu-only", err);
        return;
    }
    zt_gpu_module_entry_t entry = (zt_gpu_module_entry_t) dlsym(h, ZT_GPU_MODULE_ENTRY);
    const zt_gpu_api_t *api = entry ? entry() : NULL;
    if (!api || api->version != ZT_GPU_API_VERSION) {
        snprintf(s_why, sizeof s_why, "%s is not this ztrain's CUDA module (%s)", path,
                 api ? "another version" : "no " ZT_GPU_MODULE_ENTRY);
        dlclose(h);
        return;
    }
    s_api = api; /* kept loaded for the life of the process */
#endif
}

static const zt_gpu_api_t *s_get(void)
{
    pthread_once(&s_once, s_load);
    return s_api;
}

#define ZT_GPU_FORWARD(ret, name, params, args, fail) \
    ret name params { return s_get() ? s_api->name args : (fail); }
ZT_GPU_API_PLAIN(ZT_GPU_FORWARD)
#undef ZT_GPU_FORWARD

int zt_cuda_devices(void)
{
    return s_get() ? s_api->zt_cuda_devices() : 0;
}

const char *zt_gpu_last_error(void)
{
    return s_get() ? s_api->zt_gpu_last_error() : s_why;
}

zt_gpu_mlp_t *zt_gpu_mlp_new_on(int device, const int *sizes, int nsizes, int batch_cap, const uint8_t *x,
                                const uint8_t *y, int n, int dim, char *err, size_t errlen)
{
    if (s_get())
        return s_api->zt_gpu_mlp_new_on(device, sizes, nsizes, batch_cap, x, y, n, dim, err, errlen);
    snprintf(err, errlen, "%s", s_why);
    return NULL;
}

zt_gpu_mlp_t *zt_gpu_mlp_new(const int *sizes, int nsizes, int batch_cap, const uint8_t *x, const uint8_t *y,
                             int n, int dim, char *err, size_t errlen)
{
    return zt_gpu_mlp_new_on(0, sizes, nsizes, batch_cap, x, y, n, dim, err, errlen);
}

zt_gpu_group_t *zt_gpu_group_new(zt_gpu_mlp_t **m, int n, char *err, size_t errlen)
{
    if (s_get())
        return s_api->zt_gpu_group_new(m, n, err, errlen);
    snprintf(err, errlen, "%s", s_why);
    return NULL;
}

/* Without the module no model or pinned buffer was ever made: nothing to undo. */
void zt_gpu_mlp_destroy(zt_gpu_mlp_t **s)
{
    if (s_get())
        s_api->zt_gpu_mlp_destroy(s);
}

void zt_gpu_unpin(void *h)
{
    if (s_get())
        s_api->zt_gpu_unpin(h);
}

void zt_gpu_group_destroy(zt_gpu_group_t **g)
{
    if (s_get())
        s_api->zt_gpu_group_destroy(g);
}
