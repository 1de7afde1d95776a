/* lms-trace: reads the traces liblms writes (LMS_TRACE=FILE). */
#include "tools/commands.h"

#include <stdbool.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} commands[] = {
    { "summary", command_summary, "summary TRACE                     peaks, swap traffic and top call sites" },
    { "plot", command_plot, "plot TRACE -o OUT.svg             memory timeline as SVG" },
    { "export", command_export, "export --memory-viz TRACE -o OUT.pickle   PyTorch memory snapshot" },
    { "tune", command_tune, "tune TRACE                        replay the uses over a grid of settings" },
};

static void usage(FILE *to)
{
    fprintf(to, "usage: lms-trace COMMAND ...\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) fprintf(to, "  lms-trace %s\n", commands[i].usage);
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

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    print_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
