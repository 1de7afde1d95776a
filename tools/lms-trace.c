/* lms-trace: reads the traces liblms writes (LMS_TRACE=FILE). */
#include "tools/commands.h"

#include "preload/version.h"

#include <stdbool.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRACE_ARGUMENT "TRACE is a file liblms wrote (LMS_TRACE=FILE), or - for standard input."

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
    const char *purpose;
    const char *help;
} commands[] = {
    { "summary", command_summary, "summary TRACE", "the run's figures in one table",
      "Prints the settings, how the process ended, peak demanded against the soft limit, swap\n"
      "traffic and bandwidth, restore stalls, evictions by reason, out-of-memory errors with the\n"
      "largest live allocations their dumps list, and the top call sites by bytes allocated and\n"
      "by swap traffic: function, file and line where the program's debug information is at\n"
      "hand (its file unchanged since the run), else as recorded." },
    { "plot", command_plot, "plot TRACE -o OUT.svg", "memory timeline as SVG",
      "Draws one panel per device: demanded, resident and host bytes, the soft limit, swap\n"
      "activity, restore stalls, out-of-memory errors and dumps, and where a trace stops early.\n"
      "-o OUT.svg   the file to write (written whole or not at all)" },
    { "export", command_export, "export --memory-viz TRACE -o OUT.pickle", "a PyTorch memory snapshot",
      "Writes the trace as torch.cuda.memory._snapshot() would, for pytorch.org/memory_viz and\n"
      "torch.cuda._memory_viz: allocations and frees with their frames, swaps as segments unmapped\n"
      "and mapped again, out-of-memory errors; times from the epoch.\n"
      "-o OUT.pickle   the file to write (written whole or not at all)" },
    { "tune", command_tune, "tune TRACE [--threshold-kb N,...] [--exclude-mb N,...] [--policy NAME,...]",
      "replay the run for other settings and recommend one",
      "Replays the recorded launches (LMS_TRACE_USES=1) through liblms's own policies for a grid\n"
      "of settings and predicts each one's swap traffic and stall time. By default the grid keeps\n"
      "at least the headroom it prints outside the cache (the CUDA context, the libraries' kernels\n"
      "and workspaces, other processes: memory liblms does not see); values given here are tried\n"
      "as given.\n"
      "--threshold-kb N,...   LMS_THRESHOLD_KB values (KiB)\n"
      "--exclude-mb N,...     LMS_EXCLUDE_MB values (MiB)\n"
      "--policy NAME,...      policies (default: every one)" },
};
#define COMMAND_COUNT (sizeof commands / sizeof *commands)

static void usage(FILE *to)
{
    fprintf(to, "usage: lms-trace COMMAND [--help] ...\n       lms-trace --version\n\ncommands:\n");
    for (size_t i = 0; i < COMMAND_COUNT; i++) fprintf(to, "  %-9s %s\n", commands[i].name, commands[i].purpose);
    fprintf(to, "\n%s\nlms-trace COMMAND --help says more.\n", TRACE_ARGUMENT);
}

void print_error(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fputs("lms-trace: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
}

void format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = (double)bytes;
    size_t unit = 0;
    while (v >= 1024 && unit + 1 < sizeof units / sizeof *units) v /= 1024, unit++;
    if (unit == 0) snprintf(buf, len, "%ju B", (uintmax_t)bytes);
    else snprintf(buf, len, "%.1f %s", v, units[unit]);
}

void format_bandwidth(uint64_t bytes, double us, char *buf, size_t len)
{
    if (bytes == 0 || us <= 0) { snprintf(buf, len, "-"); return; }
    char size[32];
    format_bytes((uint64_t)((double)bytes / us * 1e6), size, sizeof size);
    snprintf(buf, len, "%s/s", size);
}

int parse_trace_and_output(int argc, char **argv, const char *usage_line, const char **trace, const char **output)
{
    *trace = *output = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) *output = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) { print_error("%s: unknown option %s\nusage: lms-trace %s", argv[0], argv[i], usage_line); return 2; }
        else if (!*trace) *trace = argv[i];
        else { print_error("%s: one trace at a time (got %s and %s)", argv[0], *trace, argv[i]); return 2; }
    }
    if (!*trace) { print_error("%s: no trace given\nusage: lms-trace %s", argv[0], usage_line); return 2; }
    return 0;
}

int output_start(output *out, const char *path, const char *trace)
{
    struct stat written, read;
    if (stat(path, &written) == 0 && stat(trace, &read) == 0 && written.st_dev == read.st_dev &&
        written.st_ino == read.st_ino) {
        print_error("%s: the output would replace the trace it is made from", path);
        return 1;
    }
    *out = (output){ .path = path };
    size_t len = strlen(path) + sizeof ".tmpXXXXXX";
    out->temporary = malloc(len);
    if (!out->temporary) { print_error("out of memory"); return 1; }
    snprintf(out->temporary, len, "%s.tmpXXXXXX", path);
    int fd = mkstemp(out->temporary);
    if (fd < 0 || !(out->file = fdopen(fd, "wb"))) {
        print_error("%s: cannot create a file beside it: %s", path, strerror(errno));
        if (fd >= 0) { close(fd); unlink(out->temporary); }
        free(out->temporary);
        return 1;
    }
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0) print_error("%s: cannot set its mode: %s", path, strerror(errno));
    return 0;
}

int output_finish(output *out, int ok)
{
    bool written = !ferror(out->file);
    if (fclose(out->file) != 0) written = false;
    int status = 0;
    if (ok && !written) { print_error("%s: write error: %s", out->path, strerror(errno)); status = 1; }
    if (ok && written && rename(out->temporary, out->path) != 0) {
        print_error("%s: %s", out->path, strerror(errno));
        status = 1;
    }
    if (!ok || status) { unlink(out->temporary); status = 1; }
    free(out->temporary);
    return status;
}

static bool asks_for_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) { usage(stdout); return 0; }
    if (strcmp(argv[1], "--version") == 0) { printf("lms-trace (liblms) %s\n", LMS_VERSION); return 0; }
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        if (asks_for_help(argc - 1, argv + 1)) {
            printf("usage: lms-trace %s\n%s\n\n%s\n%s\n", commands[i].usage, commands[i].purpose, commands[i].help,
                   TRACE_ARGUMENT);
            return 0;
        }
        return commands[i].run(argc - 1, argv + 1);
    }
    print_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
