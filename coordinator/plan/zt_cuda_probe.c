#include "plan/zt_cuda_probe.h"
#include "ztrain/zt_knobs.h"
#include "base/zt_util.h"
#include <dirent.h>
#include <string.h>
#include <ctype.h>

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
    return true;
#else
    return false;
#endif
}
