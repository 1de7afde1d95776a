#include "preload/stats.h"

#include "preload/options.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const reasons[] = { "limit", "demand", "oom-retry" };
#define REASONS (sizeof reasons / sizeof reasons[0])

static struct {
    uint64_t allocations, ooms;
    size_t peak_demanded[LMS_MAX_DEVICES], soft_limit[LMS_MAX_DEVICES];
    uint64_t evictions[REASONS];
    uint64_t bytes_out, bytes_in, restores;
    uint64_t ns_out, ns_in, stalls, stall_ns;
    size_t peak_host;
} S;

uint64_t lms_stats_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void lms_stats_alloc(void) { S.allocations++; }
void lms_stats_oom(void) { S.ooms++; }

void lms_stats_demanded(int device, size_t demanded, size_t soft_limit)
{
    if (demanded > S.peak_demanded[device])
        S.peak_demanded[device] = demanded;
    S.soft_limit[device] = soft_limit;
}

void lms_stats_host(size_t host_bytes)
{
    if (host_bytes > S.peak_host)
        S.peak_host = host_bytes;
}

void lms_stats_evicted(const char *reason, size_t bytes, uint64_t ns)
{
    for (size_t i = 0; i < REASONS; i++)
        if (strcmp(reason, reasons[i]) == 0)
            S.evictions[i]++;
    S.bytes_out += bytes;
    S.ns_out += ns;
}

void lms_stats_restored(size_t bytes_copied, uint64_t ns)
{
    S.restores++;
    S.bytes_in += bytes_copied;
    S.ns_in += ns;
}

void lms_stats_stall(uint64_t ns)
{
    S.stalls++;
    S.stall_ns += ns;
}

static const char *binary(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024 && u < 4)
        v /= 1024, u++;
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

void lms_stats_print(void)
{
    uint64_t evictions = 0;
    for (size_t i = 0; i < REASONS; i++)
        evictions += S.evictions[i];
    if (lms_opt.STATS.value == LMS_STATS_JSON) {
        fprintf(stderr, "{\"liblms\":{\"allocations\":%llu,\"out_of_memory\":%llu,\"devices\":[",
                (unsigned long long)S.allocations, (unsigned long long)S.ooms);
        for (int d = 0, first = 1; d < LMS_MAX_DEVICES; d++)
            if (S.soft_limit[d]) {
                fprintf(stderr, "%s{\"device\":%d,\"peak_demanded\":%zu,\"soft_limit\":%zu}",
                        first ? "" : ",", d, S.peak_demanded[d], S.soft_limit[d]);
                first = 0;
            }
        fprintf(stderr, "],\"swapped_out\":{\"count\":%llu,\"bytes\":%llu,\"ns\":%llu},"
                        "\"swapped_in\":{\"count\":%llu,\"bytes\":%llu,\"ns\":%llu},"
                        "\"stalls\":{\"count\":%llu,\"ns\":%llu},\"evictions\":{",
                (unsigned long long)evictions, (unsigned long long)S.bytes_out,
                (unsigned long long)S.ns_out, (unsigned long long)S.restores,
                (unsigned long long)S.bytes_in, (unsigned long long)S.ns_in,
                (unsigned long long)S.stalls, (unsigned long long)S.stall_ns);
        for (size_t i = 0; i < REASONS; i++)
            fprintf(stderr, "%s\"%s\":%llu", i ? "," : "", reasons[i], (unsigned long long)S.evictions[i]);
        fprintf(stderr, "},\"peak_host_pool\":%zu}}\n", S.peak_host);
    } else if (lms_opt.STATS.value == LMS_STATS_TABLE) {
        char a[32], b[32];
        fprintf(stderr, "liblms statistics\n");
        fprintf(stderr, "  %-28s %llu\n", "allocations", (unsigned long long)S.allocations);
        fprintf(stderr, "  %-28s %llu\n", "out-of-memory errors", (unsigned long long)S.ooms);
        for (int d = 0; d < LMS_MAX_DEVICES; d++)
            if (S.soft_limit[d])
                fprintf(stderr, "  device %-21d peak demanded %s of soft limit %s\n", d,
                        binary(S.peak_demanded[d], a, sizeof a), binary(S.soft_limit[d], b, sizeof b));
        fprintf(stderr, "  %-28s %llu, %s, %.3f s\n", "swapped out", (unsigned long long)evictions,
                binary(S.bytes_out, a, sizeof a), (double)S.ns_out / 1e9);
        fprintf(stderr, "  %-28s %llu, %s, %.3f s\n", "swapped in", (unsigned long long)S.restores,
                binary(S.bytes_in, a, sizeof a), (double)S.ns_in / 1e9);
        fprintf(stderr, "  %-28s %llu, %.3f s\n", "restore stalls", (unsigned long long)S.stalls,
                (double)S.stall_ns / 1e9);
        for (size_t i = 0; i < REASONS; i++)
            fprintf(stderr, "  evictions (%s)%*s %llu\n", reasons[i], (int)(16 - strlen(reasons[i])), "",
                    (unsigned long long)S.evictions[i]);
        fprintf(stderr, "  %-28s %s\n", "peak host pool", binary(S.peak_host, a, sizeof a));
    }
}
