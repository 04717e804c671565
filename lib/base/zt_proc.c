#include "base/zt_proc.h"
#include "base/zt_time.h"
#include <czmq.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *zt_exe_dir(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return ".";
        exe[n] = 0;
        snprintf(dir, sizeof dir, "%s", dirname(exe));
    }
    return dir;
}

int zt_stop_child(pid_t pid, int grace_ms)
{
    int status;
    if (pid <= 0 || kill(pid, SIGTERM) < 0)
        return pid > 0 && waitpid(pid, &status, 0) == pid ? status : -1;
    for (int64_t end = zt_now_ms() + grace_ms; zt_now_ms() < end; usleep(5000))
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
    kill(pid, SIGKILL);
    return waitpid(pid, &status, 0) == pid ? status : -1;
}

uint64_t zt_proc_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || p[2] == 'Z')
        return 0;
    /* fields from 3 (state) on; the start time is field 22 */
    unsigned long long start = 0;
    int field = 2;
    for (char *save = NULL, *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (++field == 22) {
            start = strtoull(t, NULL, 10);
            break;
        }
    return start;
}

bool zt_proc_alive(pid_t pid, uint64_t start_time)
{
    if (pid <= 0)
        return false;
    uint64_t now = zt_proc_start_time(pid);
    return now != 0 && (start_time == 0 || now == start_time);
}

static atomic_bool s_stop;

static _Thread_local int s_hold; /* zt_stop_hold: a save in progress on this thread */

void zt_stop_request(void)
{
    atomic_store(&s_stop, true);
}

bool zt_stop_came(void)
{
    return atomic_load(&s_stop) || zsys_interrupted;
}

bool zt_stop_requested(void)
{
    return s_hold <= 0 && zt_stop_came();
}

void zt_stop_hold(bool hold)
{
    s_hold += hold ? 1 : -1;
}
