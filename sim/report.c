/* LMS_SIM_REPORT=FILE: when the process exits, the simulator writes what its clocks read, as
 * one JSON object, so that benchmarks can see where virtual time went (engine busy time
 * against the device's and the host's clocks). `%p` in the name becomes the process id. As
 * with liblms's traces, an existing file is never overwritten (nor a symbolic link
 * followed): the report is then not written, and the log says why. */
#include "sim/sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool cd_expand_path(const char *path, char *out, size_t size)
{
    size_t used = 0;
    for (const char *c = path; *c; c++) {
        int n = c[0] == '%' && c[1] == 'p' ? snprintf(out + used, size - used, "%ld", (long)getpid())
                                           : snprintf(out + used, size - used, "%c", *c);
        if (n < 0 || (size_t)n >= size - used)
            return false;
        used += (size_t)n;
        c += c[0] == '%' && c[1] == 'p';
    }
    return true;
}

__attribute__((destructor)) static void write_report(void)
{
    const char *path = cd_getenv("LMS_SIM_REPORT");
    char expanded[4096];
    if (!path || !*path)
        return;
    if (!cd_expand_path(path, expanded, sizeof expanded)) {
        cd_log("LMS_SIM_REPORT=%s: the name is too long", path);
        return;
    }
    int fd = open(expanded, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        cd_log("LMS_SIM_REPORT=%s: cannot create it: %s", expanded, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    pthread_mutex_lock(&cd.lock);
    const sim_calibration *cal = sim_calibration_now();
    fprintf(f, "{\"simulated\": true, \"calibration\": \"%s\", \"link_gbps\": {\"h2d\": %.1f, "
            "\"d2h\": %.1f, \"bidirectional\": %.1f, \"overlap\": %.1f}, \"kernels\": {\"fp32_flops\": %.17g, "
            "\"hbm_bytes\": %.17g, \"kernel_efficiency\": %.17g, \"kernel_min_ns\": %.17g, "
            "\"zero_copy_bytes\": %.17g, \"zero_copy_direction_load\": %.17g, "
            "\"zero_copy_read_request_load\": %.17g}, \"host_ns\": %llu, "
            "\"host_waited_ns\": %llu, \"devices\": [",
            cal->version, cal->pinned_h2d / 1e9, cal->pinned_d2h / 1e9, cal->pinned_bidirectional / 1e9,
            cal->pinned_overlap / 1e9, cal->fp32_flops, cal->hbm_bytes, cal->kernel_efficiency, cal->kernel_min_ns,
            cal->zero_copy_bytes, cal->zero_copy_direction_load, cal->zero_copy_read_request_load,
            (unsigned long long)cd_host_now(), (unsigned long long)cd_host_waited());
    for (int d = 0; d < cd.device_count; d++) {
        const sim_timeline *t = &cd.devices[d].timeline;
        fprintf(f, "%s{\"done_ns\": %llu, \"busy_ns\": {\"compute\": %llu, \"h2d\": %llu, \"d2h\": %llu}}",
                d ? ", " : "", (unsigned long long)cd_device_vt_end_locked(d),
                (unsigned long long)t->busy_ns[SIM_ENGINE_COMPUTE],
                (unsigned long long)t->busy_ns[SIM_ENGINE_H2D],
                (unsigned long long)t->busy_ns[SIM_ENGINE_D2H]);
    }
    fprintf(f, "]}\n");
    pthread_mutex_unlock(&cd.lock);
    if (fclose(f) != 0)
        cd_log("LMS_SIM_REPORT=%s: writing it failed", expanded);
}
