/* Values echoed in liblms's one-line errors: what the user gave, shown so that the line stays
 * one line and keeps its end (the "expected ..." part), whatever the value holds. */
#ifndef LMS_PRELOAD_QUOTE_H
#define LMS_PRELOAD_QUOTE_H

#include <stddef.h>

/* Bytes of the value shown before it is cut. */
#define LMS_QUOTE_SHOWN 120
/* Room for any quoted value: the shown bytes, each escaped to at most 4, and the note. */
#define LMS_QUOTE_SIZE (4 * LMS_QUOTE_SHOWN + 64)

/* Copies text into buf (LMS_QUOTE_SIZE bytes) with control characters, DEL and backslashes
 * escaped as in C (\n, \t, \\, \x1b), and, past LMS_QUOTE_SHOWN bytes, cut with
 * "...(N bytes, cut)" after it. Returns buf. Allocates nothing: safe at load and in hooks. */
const char *lms_quote(const char *text, char *buf);

#endif
