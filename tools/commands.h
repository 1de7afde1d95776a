/* The subcommands of lms-trace; each returns the exit status (0 ok, 1 bad trace or output,
 * 2 bad usage) and prints its own errors. */
#ifndef LMS_TOOLS_COMMANDS_H
#define LMS_TOOLS_COMMANDS_H

#include <stdint.h>
#include <stdio.h>

int command_summary(int argc, char **argv);
int command_plot(int argc, char **argv);
int command_export(int argc, char **argv);
int command_tune(int argc, char **argv);

/* Shared by the commands. */
void format_bytes(uint64_t bytes, char *buf, size_t len);   /* "640.0 MiB" */
void format_bandwidth(uint64_t bytes, double us, char *buf, size_t len);   /* "25.0 GiB/s"; "-" for none */
void print_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* "lms-trace: ..." */
/* Parses "TRACE -o OUT" style arguments: sets *trace and *output (NULL when not given);
 * returns 0, or 2 after printing a usage error. */
int parse_trace_and_output(int argc, char **argv, const char *usage, const char **trace, const char **output);

/* Output files appear whole or not at all: written to a temporary name beside them, renamed
 * by output_finish when `ok`, removed otherwise. Returns 0, or 1 after printing the error. */
typedef struct output {
    FILE *file;
    const char *path;
    char *temporary;
} output;
int output_start(output *out, const char *path, const char *trace);
int output_finish(output *out, int ok);

#endif
