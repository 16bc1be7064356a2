/*
 * Preload library for the simulated A3 hosts: it changes what processes on ONE simulated host see of the clock,
 * the CPU architecture and free disk space, so that the faults clock-skew, arch and low-disk are visible to every
 * dynamically linked tool (date, uname, df, python, Ansible facts) without touching this machine's kernel, which all
 * simulated hosts share. Go programs (dockerd, docker) make system calls directly and are not affected.
 *
 * It is listed in /etc/ld.so.preload only while one of those faults is on. Its settings are read once per process
 * from /etc/verl-sim/shim.conf (lines KEY=VALUE): SKEW_S (seconds added to the wall clock), ARCH (uname machine),
 * AVAIL_BYTES (largest free space statvfs/statfs report) and KEEP_PREFIX (a path whose file system keeps its real
 * free space: the shared storage, which is not the host's disk).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <time.h>

static long long skew_s = 0;
static char arch[65] = "";
static unsigned long long avail_bytes = 0;
static char keep_prefix[256] = "";
static int loaded = 0;

static void load_conf(void) {
    if (loaded) return;
    loaded = 1;
    /* VERL_SIM_SHIM_CONF lets the unit tests point a process at a scratch file. */
    const char *path = getenv("VERL_SIM_SHIM_CONF");
    FILE *f = fopen(path && *path ? path : "/etc/verl-sim/shim.conf", "re");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!strncmp(line, "SKEW_S=", 7)) skew_s = strtoll(line + 7, NULL, 10);
        else if (!strncmp(line, "ARCH=", 5)) snprintf(arch, sizeof arch, "%s", line + 5);
        else if (!strncmp(line, "AVAIL_BYTES=", 12)) avail_bytes = strtoull(line + 12, NULL, 10);
        else if (!strncmp(line, "KEEP_PREFIX=", 12)) snprintf(keep_prefix, sizeof keep_prefix, "%s", line + 12);
    }
    fclose(f);
}

__attribute__((constructor)) static void init(void) { load_conf(); }

/* ---- clock ---- */
int clock_gettime(clockid_t clk, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *) = NULL;
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(clk, ts);
    load_conf();
    if (rc == 0 && skew_s && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) ts->tv_sec += skew_s;
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    static int (*real)(struct timeval *restrict, void *restrict) = NULL;
    if (!real) real = (int (*)(struct timeval *restrict, void *restrict))dlsym(RTLD_NEXT, "gettimeofday");
    int rc = real(tv, tz);
    load_conf();
    if (rc == 0) tv->tv_sec += skew_s;
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC) return 0;
    return clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}

/* ---- architecture ---- */
int uname(struct utsname *buf) {
    static int (*real)(struct utsname *) = NULL;
    if (!real) real = (int (*)(struct utsname *))dlsym(RTLD_NEXT, "uname");
    int rc = real(buf);
    load_conf();
    if (rc == 0 && buf && arch[0]) snprintf(buf->machine, sizeof buf->machine, "%s", arch);
    return rc;
}

/* ---- free disk space ---- */
static int keep(const char *path) {
    size_t n = strlen(keep_prefix);
    return path && n && !strncmp(path, keep_prefix, n) && (path[n] == 0 || path[n] == '/');
}

/* Lower the free and available block counts to what AVAIL_BYTES allows; the struct types differ only in name. */
#define CAP(s, unit)                                                                   \
    do {                                                                               \
        if (avail_bytes && (s)->unit) {                                         \
            unsigned long long blocks = avail_bytes / (unsigned long long)(s)->unit;   \
            if ((unsigned long long)(s)->f_bavail > blocks) (s)->f_bavail = blocks;    \
            if ((unsigned long long)(s)->f_bfree > blocks) (s)->f_bfree = blocks;      \
        }                                                                              \
    } while (0)

#define WRAP_PATH(name, type, unit)                                                  \
    int name(const char *path, struct type *buf) {                                     \
        static int (*real)(const char *, struct type *) = NULL;                        \
        if (!real) real = (int (*)(const char *, struct type *))dlsym(RTLD_NEXT, #name); \
        int rc = real(path, buf);                                                      \
        load_conf();                                                                   \
        if (rc == 0 && !keep(path)) CAP(buf, unit);                                       \
        return rc;                                                                     \
    }

#define WRAP_FD(name, type, unit)                                                    \
    int name(int fd, struct type *buf) {                                               \
        static int (*real)(int, struct type *) = NULL;                                 \
        if (!real) real = (int (*)(int, struct type *))dlsym(RTLD_NEXT, #name);        \
        int rc = real(fd, buf);                                                        \
        load_conf();                                                                   \
        if (rc == 0) CAP(buf, unit);                                                   \
        return rc;                                                                     \
    }

/* Both the plain and the *64 names are exported by glibc and both are called. */
WRAP_PATH(statvfs, statvfs, f_frsize)
WRAP_PATH(statvfs64, statvfs64, f_frsize)
WRAP_PATH(statfs, statfs, f_bsize)
WRAP_PATH(statfs64, statfs64, f_bsize)
WRAP_FD(fstatvfs, statvfs, f_frsize)
WRAP_FD(fstatvfs64, statvfs64, f_frsize)
WRAP_FD(fstatfs, statfs, f_bsize)
WRAP_FD(fstatfs64, statfs64, f_bsize)
