#include "plan/zt_cuda_probe.h"
#include "ztrain/zt_knobs.h"
#include "base/zt_util.h"
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int zt_gpu_count(void)
{
    const char *v = zt_knob_str(ZT_KNOB_GPU_COUNT);
    long long n;
    if (strcmp(v, "auto") && zt_parse_int(v, &n) && n >= 0)
        return (int) n;
    int count = 0;
    DIR *d = opendir("/dev");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (strncmp(s, "nvidia", 6) || !s[6])
            continue;
        bool digits = true;
        for (const char *p = s + 6; *p; p++)
            digits = digits && isdigit((unsigned char) *p);
        count += digits;
    }
    closedir(d);
    return count;
}

bool zt_have_cuda_build(void)
{
#ifdef ZT_HAVE_CUDA
    /* and its module where the trainer looks for it (a build, an install;
     * a wheel made without WHEEL_CUDA=1 carries none) */
    const char *given = zt_knob_str(ZT_KNOB_GPU_MODULE);
    if (given && *given)
        return true;
    const char *dirs[] = { "lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu" };
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/../%s/ztrain/libztgpu.so", zt_exe_dir(), dirs[i]);
        if (access(path, F_OK) == 0)
            return true;
    }
    return false;
#else
    return false;
#endif
}
