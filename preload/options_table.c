/* The documentation of liblms's options, generated from LMS_OPTION_TABLE:
 *   lms-options-table            the README's Markdown table
 *   lms-options-table --tsv      "#liblms VERSION", then variable, value, default, meaning:
 *                                lms-run's options
 *   lms-options-table --man      the entries of liblms(7)'s ENVIRONMENT section
 *   lms-options-table --man-run  the entries of lms-run(1)'s OPTIONS section */
#include "preload/options.h"
#include "preload/version.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

/* Text for troff: backquoted code in bold, and the characters troff reads as its own escaped. */
static void put_man(const char *text)
{
    bool code = false;
    for (const char *c = text; *c; c++) {
        if (*c == '`') fputs((code = !code) ? "\\fB" : "\\fR", stdout);
        else if (*c == '-') fputs("\\-", stdout);
        else if (*c == '\\') fputs("\\e", stdout);
        else putchar(*c);
    }
}

/* LMS_THRESHOLD_KB -> threshold-kb */
static void put_flag(const char *env, bool for_man)
{
    for (const char *c = env + strlen("LMS_"); *c; c++)
        if (*c == '_') fputs(for_man ? "\\-" : "-", stdout);
        else putchar(tolower((unsigned char)*c));
}

int main(int argc, char **argv)
{
    const char *format = argc > 1 ? argv[1] : "";
    if (argc > 2 || (argc == 2 && strcmp(format, "--tsv") && strcmp(format, "--man") && strcmp(format, "--man-run"))) {
        fprintf(stderr, "usage: lms-options-table [--tsv | --man | --man-run]\n");
        return 2;
    }
    if (!format[0]) printf("| Variable | Default | Accepted values | Meaning |\n|---|---|---|---|\n");
    if (strcmp(format, "--tsv") == 0) printf("#liblms\t%s\n", LMS_VERSION);
    for (size_t i = 0; i < lms_options_count(); i++) {
        lms_option_doc o;
        lms_options_doc(i, &o);
        if (!format[0]) {
            printf("| `%s` | %s | %s | %s |\n", o.env, o.def, o.accepted, o.doc);
        } else if (strcmp(format, "--tsv") == 0) {
            printf("%s\t%s\t%s\t", o.env, o.value, o.def);
            for (const char *c = o.doc; *c; c++)
                if (*c != '`') putchar(*c);
            putchar('\n');
        } else {
            bool run = strcmp(format, "--man-run") == 0;
            printf(".TP\n");
            if (run) {
                printf(".BI \\-\\-");
                put_flag(o.env, true);
                printf(" \" %s\"\nSets \\fB%s\\fR: ", o.value, o.env);
            } else {
                printf(".B %s\n", o.env);
            }
            put_man(o.doc);
            printf(".\nDefault: ");
            put_man(o.def);
            printf("; accepted: ");
            put_man(o.accepted);
            printf(".\n");
        }
    }
    return 0;
}
