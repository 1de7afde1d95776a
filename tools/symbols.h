/* Names of code addresses from the files of the objects that ran (elfutils' libdwfl): the
 * function from the object's symbol table, the file and line from its DWARF debug
 * information. An object is used only while its file is the one that ran (same GNU build
 * id); otherwise, or without the file, lookups fail and callers keep the names recorded. */
#ifndef LMS_TOOLS_SYMBOLS_H
#define LMS_TOOLS_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct symbols symbols;

symbols *symbols_new(void);            /* NULL when out of memory */
void symbols_free(symbols *s);
/* An object loaded at `bias` (its file addresses are address - bias). */
void symbols_add_object(symbols *s, const char *path, uint64_t bias, const char *build_id);
typedef struct symbol {
    const char *function;
    const char *file;          /* NULL when the object has no line information */
    int line;
} symbol;
/* The code before return address pc (the call). False when no usable object holds pc. The
 * strings live as long as `s`. */
bool symbols_find(symbols *s, uint64_t pc, symbol *found);

#endif
