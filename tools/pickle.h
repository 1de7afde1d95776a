/* A streaming writer of Python pickles (protocol 2): dicts, lists, ints, strings, booleans.
 * Containers are written as MARK ... SETITEMS / APPENDS, so a value of any length needs no
 * memory here. Strings are written as ASCII: other bytes become '?'. */
#ifndef LMS_TOOLS_PICKLE_H
#define LMS_TOOLS_PICKLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

void pickle_start(FILE *f);
void pickle_stop(FILE *f);
void pickle_dict_begin(FILE *f);     /* then key, value, key, value ... */
void pickle_dict_end(FILE *f);
void pickle_list_begin(FILE *f);
void pickle_list_end(FILE *f);
void pickle_int(FILE *f, int64_t v);
void pickle_string(FILE *f, const char *s);
void pickle_bool(FILE *f, bool v);
void pickle_pair_of_ints(FILE *f, int64_t a, int64_t b);   /* a tuple (a, b) */

#endif
