/* Pickle protocol 2 opcodes, as in CPython's Lib/pickle.py. */
#include "tools/pickle.h"

#include <string.h>

enum {
    PROTO = 0x80, STOP = '.', MARK = '(', EMPTY_DICT = '}', SETITEMS = 'u', EMPTY_LIST = ']',
    APPENDS = 'e', BININT = 'J', LONG1 = 0x8a, BINUNICODE = 'X', NEWTRUE = 0x88, NEWFALSE = 0x89,
    TUPLE2 = 0x86,
};

static void le32(FILE *f, uint32_t v)
{
    for (int i = 0; i < 4; i++) fputc((int)(v >> (8 * i) & 0xff), f);
}

void pickle_start(FILE *f) { fputc(PROTO, f); fputc(2, f); }
void pickle_stop(FILE *f) { fputc(STOP, f); }
void pickle_dict_begin(FILE *f) { fputc(EMPTY_DICT, f); fputc(MARK, f); }
void pickle_dict_end(FILE *f) { fputc(SETITEMS, f); }
void pickle_list_begin(FILE *f) { fputc(EMPTY_LIST, f); fputc(MARK, f); }
void pickle_list_end(FILE *f) { fputc(APPENDS, f); }
void pickle_bool(FILE *f, bool v) { fputc(v ? NEWTRUE : NEWFALSE, f); }

void pickle_int(FILE *f, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX) {
        fputc(BININT, f);
        le32(f, (uint32_t)(int32_t)v);
        return;
    }
    /* LONG1: little-endian two's complement, 8 bytes are always enough. */
    fputc(LONG1, f);
    fputc(8, f);
    for (int i = 0; i < 8; i++) fputc((int)((uint64_t)v >> (8 * i) & 0xff), f);
}

void pickle_string(FILE *f, const char *s)
{
    size_t n = strlen(s);
    fputc(BINUNICODE, f);
    le32(f, (uint32_t)n);
    for (size_t i = 0; i < n; i++) fputc((unsigned char)s[i] < 0x80 ? s[i] : '?', f);
}

void pickle_pair_of_ints(FILE *f, int64_t a, int64_t b)
{
    pickle_int(f, a);
    pickle_int(f, b);
    fputc(TUPLE2, f);
}
