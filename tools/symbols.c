#include "tools/symbols.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct named {             /* an address already looked up */
    uint64_t pc;
    bool found;
    char *function, *file;
    int line;
    UT_hash_handle hh;
} named;

typedef struct object {
    Dwfl_Module *module;
    bool usable;                   /* its file is the one that ran */
} object;

struct symbols {
    Dwfl *dwfl;
    object *objects;
    size_t count, capacity;
    named *names;
};

static char *debuginfo_path;       /* libdwfl's default: beside the file, and /usr/lib/debug */
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

symbols *symbols_new(void)
{
    symbols *s = calloc(1, sizeof *s);
    if (s && !(s->dwfl = dwfl_begin(&callbacks))) {
        free(s);
        return NULL;
    }
    return s;
}

void symbols_free(symbols *s)
{
    if (!s) return;
    named *n, *tmp;
    HASH_ITER(hh, s->names, n, tmp) {
        HASH_DEL(s->names, n);
        free(n->function);
        free(n->file);
        free(n);
    }
    dwfl_end(s->dwfl);
    free(s->objects);
    free(s);
}

static bool same_build_id(Dwfl_Module *module, const char *hex)
{
    const unsigned char *bits;
    GElf_Addr where;
    int n = dwfl_module_build_id(module, &bits, &where);
    if (n <= 0) return !hex[0];
    if (strlen(hex) != 2 * (size_t)n) return false;
    for (int i = 0; i < n; i++) {
        char byte[3];
        snprintf(byte, sizeof byte, "%02x", bits[i]);
        if (memcmp(byte, hex + 2 * i, 2) != 0) return false;
    }
    return true;
}

void symbols_add_object(symbols *s, const char *path, uint64_t bias, const char *build_id)
{
    if (s->count == s->capacity) {
        size_t capacity = s->capacity ? 2 * s->capacity : 16;
        object *grown = realloc(s->objects, capacity * sizeof *grown);
        if (!grown) return;
        s->objects = grown;
        s->capacity = capacity;
    }
    dwfl_report_begin_add(s->dwfl);
    Dwfl_Module *module = dwfl_report_elf(s->dwfl, path, path, -1, bias, true);
    dwfl_report_end(s->dwfl, NULL, NULL);
    if (module) s->objects[s->count++] = (object){ module, same_build_id(module, build_id) };
}

/* The line of the call in the function the symbol table names: where code was inlined into
 * it, the line of the outermost inlined call rather than a line of the inlined function. */
static bool source_line(Dwfl_Module *module, Dwarf_Addr pc, const char **file, int *line)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = dwfl_module_addrdie(module, pc, &bias);
    if (!cu) return false;
    /* dwarf_getscopes stops at the innermost inlined instance; the chain of instances around
     * it, up to the function, comes from dwarf_getscopes_die. */
    Dwarf_Die *innermost = NULL, *scopes = NULL;
    int count = dwarf_getscopes(cu, pc - bias, &innermost), outermost = -1;
    count = count > 0 && dwarf_tag(&innermost[0]) == DW_TAG_inlined_subroutine ? dwarf_getscopes_die(&innermost[0], &scopes) : 0;
    free(innermost);
    for (int i = 0; i < count; i++)
        if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine) outermost = i;
    bool found = false;
    if (outermost >= 0) {
        Dwarf_Attribute attribute;
        Dwarf_Word file_index, line_number;
        Dwarf_Files *files;
        size_t file_count;
        if (dwarf_formudata(dwarf_attr(&scopes[outermost], DW_AT_call_file, &attribute), &file_index) == 0 &&
            dwarf_formudata(dwarf_attr(&scopes[outermost], DW_AT_call_line, &attribute), &line_number) == 0 &&
            dwarf_getsrcfiles(cu, &files, &file_count) == 0 && file_index < file_count) {
            *file = dwarf_filesrc(files, file_index, NULL, NULL);
            *line = (int)line_number;
            found = *file != NULL;
        }
    }
    free(scopes);
    if (found) return true;
    Dwfl_Line *source = dwfl_module_getsrc(module, pc);
    *file = source ? dwfl_lineinfo(source, NULL, line, NULL, NULL, NULL) : NULL;
    return *file != NULL;
}

static void look_up(symbols *s, named *n)
{
    Dwarf_Addr call = n->pc - 1;   /* return addresses point after the call */
    Dwfl_Module *module = dwfl_addrmodule(s->dwfl, call);
    bool usable = false;
    for (size_t i = 0; i < s->count && module; i++)
        if (s->objects[i].module == module) usable = s->objects[i].usable;
    const char *function = usable ? dwfl_module_addrname(module, call) : NULL;
    if (!function || !(n->function = strdup(function))) return;
    const char *file;
    if (source_line(module, call, &file, &n->line)) n->file = strdup(file);
    n->found = true;
}

bool symbols_find(symbols *s, uint64_t pc, symbol *found)
{
    named *n;
    HASH_FIND(hh, s->names, &pc, sizeof pc, n);
    if (!n && (n = calloc(1, sizeof *n))) {
        n->pc = pc;
        look_up(s, n);
        HASH_ADD(hh, s->names, pc, sizeof n->pc, n);
    }
    if (!n || !n->found) return false;
    *found = (symbol){ n->function, n->file, n->file ? n->line : 0 };
    return true;
}
