#include "preload/options.h"

#include "policy/policy.h"
#include "preload/log.h"
#include "preload/quote.h"
#include "preload/signals.h"

#include <ctype.h>
#include <signal.h>
#include <stdbool.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const lms_mode_names[] = { "swap", "cap", "off", NULL };
const char *const lms_stats_names[] = { "off", "table", "json", NULL };
const char *const lms_flag_names[] = { "0", "1", NULL };

lms_options lms_opt;

enum option_kind { SIZE, COUNT, LEVEL, ENUM, PATH, SIGNAL };

typedef struct option_spec {
    const char *env;
    enum option_kind kind;
    uint64_t unit;
    const char *def;
    const char *const *choices;
    const char *doc;
    lms_option_value *value;
} option_spec;

static const option_spec options[] = {
#define LMS_OPTION_SPEC(name, kind, unit, def, choices, doc) \
    { "LMS_" #name, kind, unit, def, choices, doc, &lms_opt.name },
    LMS_OPTION_TABLE(LMS_OPTION_SPEC)
#undef LMS_OPTION_SPEC
};
#define OPTION_COUNT (sizeof options / sizeof options[0])

static const char *unit_name(uint64_t unit) { return unit == 1024 ? "KiB" : "MiB"; }

static void bad_value(const char *env, const char *text, const char *expected)
{
    char quoted[LMS_QUOTE_SIZE];
    lms_exit_bad_input("%s='%s' is invalid: expected %s", env, lms_quote(text, quoted), expected);
}

static void size_expected(uint64_t unit, char *buf, size_t size)
{
    snprintf(buf, size, "a whole number of %s, or a number with a K, M or G suffix in either case (e.g. 512, 64M, 2g)",
             unit_name(unit));
}

/* A whole number without sign, optionally followed by one of K, M, G (binary), in either case:
 * 64m is 64M, as in ulimit's, dd's and GNU sort's sizes. */
static int parse_size(const char *text, uint64_t unit, uint64_t *bytes)
{
    if (!isdigit((unsigned char)text[0]))
        return 0;
    errno = 0;
    char *end;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return 0;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': unit = 1ULL << 10; break;
        case 'M': unit = 1ULL << 20; break;
        case 'G': unit = 1ULL << 30; break;
        default: return 0;
        }
        if (end[1])
            return 0;
    }
    if (n > UINT64_MAX / unit)
        return 0;
    *bytes = n * unit;
    return 1;
}

static int parse_choice(const char *text, const char *const *choices, uint64_t *index)
{
    for (uint64_t i = 0; choices[i]; i++)
        if (strcmp(text, choices[i]) == 0) {
            *index = i;
            return 1;
        }
    return 0;
}

static void describe_choices(const char *const *choices, char *buf, size_t size)
{
    size_t len = (size_t)snprintf(buf, size, "one of");
    for (size_t i = 0; choices[i] && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s %s", i ? "," : "", choices[i]);
}

static void parse_option(const option_spec *o, const char *text)
{
    char expected[256];
    switch (o->kind) {
    case SIZE:
        size_expected(o->unit, expected, sizeof expected);
        if (!parse_size(text, o->unit, &o->value->value))
            bad_value(o->env, text, expected);
        break;
    case COUNT:
        snprintf(expected, sizeof expected, "a whole number from 0 to %llu",
                 (unsigned long long)o->unit);
        if (!parse_size(text, 1, &o->value->value) || !isdigit((unsigned char)text[strlen(text) - 1]) ||
            o->value->value > o->unit)
            bad_value(o->env, text, expected);
        break;
    case SIGNAL: {
        int number = lms_dump_signal_number(text);
        if (number < 0)
            bad_value(o->env, text,
                      "a signal name or number that may ask for a dump (e.g. USR1, SIGUSR2, 10), none that stops "
                      "the program or reports a fault (" LMS_DUMP_REFUSED_SIGNALS ")");
        o->value->value = (uint64_t)number;
        break;
    }
    case LEVEL:
        if (!(text[0] >= '0' && text[0] <= '3' && text[1] == '\0'))
            bad_value(o->env, text, "a log level from 0 to 3");
        o->value->value = (uint64_t)(text[0] - '0');
        break;
    case ENUM:
        describe_choices(o->choices, expected, sizeof expected);
        if (!parse_choice(text, o->choices, &o->value->value))
            bad_value(o->env, text, expected);
        break;
    case PATH:
        if (!text[0])
            bad_value(o->env, text, "a file path");
        break;
    }
    o->value->text = text;
}

static uint64_t half_of_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 1ULL << 30;
}

void lms_options_load(void)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_spec *o = &options[i];
        const char *text = secure_getenv(o->env);
        if (text)
            parse_option(o, text);
        else if (o->def[0])
            parse_option(o, o->def), o->value->text = NULL;
        else
            *o->value = (lms_option_value){ 0, NULL };
    }
    if (!lms_opt.HOST_LIMIT_MB.text)
        lms_opt.HOST_LIMIT_MB.value = half_of_physical_memory();

    for (int dev = 0; dev < LMS_MAX_DEVICES; dev++) {
        char env[32];
        snprintf(env, sizeof env, "LMS_EXCLUDE_MB_%d", dev);
        const char *text = secure_getenv(env);
        lms_opt.exclude_bytes[dev] =
            lms_opt.EXCLUDE_MB.text ? lms_opt.EXCLUDE_MB.value : LMS_EXCLUDE_COMPUTED;
        if (text && !parse_size(text, 1ULL << 20, &lms_opt.exclude_bytes[dev])) {
            char expected[256];
            size_expected(1ULL << 20, expected, sizeof expected);
            bad_value(env, text, expected);
        }
    }
}

/* A size in the unit of its option's name: LMS_HOST_LIMIT_MB = 12052.8 MiB. */
static void format_size(uint64_t bytes, uint64_t unit, char *buf, size_t len)
{
    if (bytes % unit == 0) snprintf(buf, len, "%llu %s", (unsigned long long)(bytes / unit), unit_name(unit));
    else snprintf(buf, len, "%.1f %s", (double)bytes / (double)unit, unit_name(unit));
}

void lms_options_dump(void)
{
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option_spec *o = &options[i];
        const lms_option_value *v = o->value;
        bool computed = !v->text && !o->def[0] && o->kind == SIZE;
        const char *from = v->text ? "environment" : computed ? "computed" : "default";
        char shown[512];
        switch (o->kind) {
        case SIZE:
            if (computed && !v->value) snprintf(shown, sizeof shown, "per device, at its first use");
            else format_size(v->value, o->unit, shown, sizeof shown);
            break;
        case COUNT:
        case LEVEL: snprintf(shown, sizeof shown, "%llu", (unsigned long long)v->value); break;
        case SIGNAL:
            snprintf(shown, sizeof shown, "%s", v->value ? sigabbrev_np((int)v->value) : "(none)");
            break;
        case ENUM: snprintf(shown, sizeof shown, "%s", o->choices[v->value]); break;
        case PATH: snprintf(shown, sizeof shown, "%s", v->text ? v->text : "(none)"); break;
        }
        lms_log(LMS_LOG_INFO, -1, "option %s = %s (%s)", o->env, shown, from);
    }
}

size_t lms_options_count(void) { return OPTION_COUNT; }

void lms_options_doc(size_t i, lms_option_doc *doc)
{
    const option_spec *o = &options[i];
    *doc = (lms_option_doc){ .env = o->env, .doc = o->doc,
                             .def = o->def[0] ? o->def : o->kind == SIZE ? "(computed)" : "(none)" };
    switch (o->kind) {
    case SIZE:
        snprintf(doc->accepted, sizeof doc->accepted, "whole number of %s, or with K/M/G suffix (k/m/g too)",
                 unit_name(o->unit));
        snprintf(doc->value, sizeof doc->value, "N");
        break;
    case COUNT:
        snprintf(doc->accepted, sizeof doc->accepted, "0 to %llu", (unsigned long long)o->unit);
        snprintf(doc->value, sizeof doc->value, "N");
        break;
    case SIGNAL:
        snprintf(doc->accepted, sizeof doc->accepted, "signal name or number");
        snprintf(doc->value, sizeof doc->value, "SIGNAL");
        break;
    case LEVEL:
        snprintf(doc->accepted, sizeof doc->accepted, "0 to 3");
        snprintf(doc->value, sizeof doc->value, "0-3");
        break;
    case ENUM:
        for (size_t c = 0, len = 0, value_len = 0; o->choices[c]; c++) {
            len += (size_t)snprintf(doc->accepted + len, sizeof doc->accepted - len, "%s`%s`", c ? ", " : "",
                                    o->choices[c]);
            value_len += (size_t)snprintf(doc->value + value_len, sizeof doc->value - value_len, "%s%s", c ? "|" : "",
                                          o->choices[c]);
        }
        break;
    case PATH:
        snprintf(doc->accepted, sizeof doc->accepted, "file path");
        snprintf(doc->value, sizeof doc->value, "FILE");
        break;
    }
}
