/* What the C baselines share: a write callback that drops the body, and the process's CPU time. */
#ifndef FLEETSET_BASELINE_H
#define FLEETSET_BASELINE_H

#include <stddef.h>
#include <sys/resource.h>

static size_t discard(char *data, size_t size, size_t count, void *context) {
    (void)data; (void)context;
    return size * count;
}

/* User + system CPU time of this process so far, in microseconds. */
static double cpu_microseconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

#endif
