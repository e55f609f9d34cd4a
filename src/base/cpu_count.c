/* SPDX-License-Identifier: MIT */
/* cpu_count.c - how many threads this process may usefully run: its CPU
 * affinity mask, capped by the cgroup CPU quota. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <cexec/cexec.h>

#include <cexec/pool.h>

/* ceil(quota / period) from cgroup v2 "cpu.max" ("max 100000" or
 * "200000 100000"); 0 when unlimited or unreadable. */
static unsigned quota_v2(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char q[32];
    unsigned long long quota = 0, period = 0;
    int got = fscanf(f, "%31s %llu", q, &period);
    fclose(f);
    if (got != 2 || strcmp(q, "max") == 0 || period == 0) return 0;
    if (sscanf(q, "%llu", &quota) != 1 || quota == 0) return 0;
    return (unsigned)((quota + period - 1) / period);
}

static unsigned quota_v1(void) {
    long long quota = -1, period = 0;
    FILE *f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");
    if (!f) f = fopen("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "r");
    if (!f) return 0;
    if (fscanf(f, "%lld", &quota) != 1) quota = -1;
    fclose(f);
    f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
    if (!f) f = fopen("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "r");
    if (!f) return 0;
    if (fscanf(f, "%lld", &period) != 1) period = 0;
    fclose(f);
    if (quota <= 0 || period <= 0) return 0;
    return (unsigned)((quota + period - 1) / period);
}

/* The process's cgroup v2 path from /proc/self/cgroup ("0::/path"). */
static void cgroup_v2_dir(char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) == 0) {
            size_t n = strcspn(line + 3, "\n");
            if (n < size && !(n == 1 && line[3] == '/')) {
                memcpy(out, line + 3, n);
                out[n] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

unsigned ex_default_thread_count(void) {
    unsigned n = 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int c = CPU_COUNT(&set);
        if (c > 0) n = (unsigned)c;
    }
    char dir[400];
    cgroup_v2_dir(dir, sizeof dir);
    unsigned q = quota_v2(dir);
    if (!q && dir[0]) q = quota_v2("");
    if (!q) q = quota_v1();
    if (q && q < n) n = q;
    return n ? n : 1;
}
