/* The streaming JSON reader: a buffered file, an arena for trees, errors by longjmp. */
#include "tools/json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK (1u << 16)
#define MAX_DEPTH 64
#define ARENA_BLOCK (1u << 20)

typedef struct arena_block {
    struct arena_block *next;
    size_t used, size;
    max_align_t data[];
} arena_block;

struct json_reader {
    FILE *file;
    char *path;
    unsigned char buffer[READ_CHUNK];
    size_t have, at;           /* bytes in buffer, next one to read */
    uint64_t offset;           /* file offset of buffer[at] */
    bool ended;                /* a read found the end of the input */
    jmp_buf on_error;
    char error[512];
    arena_block *arena;        /* the newest block first */
    char *text;                /* a string being read */
    size_t text_len, text_cap;
    json_value *stack;         /* members of open arrays and objects */
    const char **stack_keys;
    size_t stack_len, stack_cap;
};

/* Standard input, copied once into a temporary file, so that it can be read again. */
static FILE *standard_input(char *err, size_t err_len)
{
    static FILE *copy;
    if (!copy) {
        if (!(copy = tmpfile())) {
            snprintf(err, err_len, "standard input: cannot keep a copy: %s", strerror(errno));
            return NULL;
        }
        char chunk[READ_CHUNK];
        for (size_t n; (n = fread(chunk, 1, sizeof chunk, stdin)) > 0;)
            if (fwrite(chunk, 1, n, copy) != n) break;
        if (ferror(stdin) || fflush(copy) != 0 || ferror(copy)) {
            snprintf(err, err_len, "standard input: cannot keep a copy: %s", strerror(errno));
            fclose(copy);
            copy = NULL;
            return NULL;
        }
    }
    int fd = dup(fileno(copy));
    FILE *file = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!file) {
        snprintf(err, err_len, "standard input: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    rewind(file);
    return file;
}

json_reader *json_open(const char *path, char *err, size_t err_len)
{
    bool from_stdin = strcmp(path, "-") == 0;
    FILE *file = from_stdin ? standard_input(err, err_len) : fopen(path, "rb");
    if (!file) {
        if (!from_stdin) snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (from_stdin) path = "standard input";
    json_reader *reader = calloc(1, sizeof *reader);
    if (!reader || !(reader->path = strdup(path))) {
        snprintf(err, err_len, "%s: out of memory", path);
        fclose(file);
        free(reader);
        return NULL;
    }
    reader->file = file;
    return reader;
}

void json_close(json_reader *reader)
{
    if (!reader) return;
    for (arena_block *b = reader->arena, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    fclose(reader->file);
    free(reader->path);
    free(reader->text);
    free(reader->stack);
    free(reader->stack_keys);
    free(reader);
}

jmp_buf *json_catch(json_reader *reader) { return &reader->on_error; }
bool json_ended(const json_reader *reader) { return reader->ended; }
uint64_t json_offset(const json_reader *reader) { return reader->offset; }
const char *json_path(const json_reader *reader) { return reader->path; }
const char *json_error(const json_reader *reader) { return reader->error; }

void json_fail(json_reader *reader, const char *fmt, ...)
{
    int n = snprintf(reader->error, sizeof reader->error, "%s: offset %ju: ", reader->path,
                     (uintmax_t)reader->offset);
    va_list args;
    va_start(args, fmt);
    vsnprintf(reader->error + n, sizeof reader->error - (size_t)n, fmt, args);
    va_end(args);
    longjmp(reader->on_error, 1);
}

static void *arena_alloc(json_reader *reader, size_t bytes)
{
    bytes = (bytes + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_block *b = reader->arena;
    if (!b || b->size - b->used < bytes) {
        size_t size = bytes > ARENA_BLOCK ? bytes : ARENA_BLOCK;
        b = malloc(sizeof *b + size);
        if (!b) json_fail(reader, "out of memory");
        b->next = reader->arena;
        b->used = 0;
        b->size = size;
        reader->arena = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += bytes;
    return p;
}

void json_arena_reset(json_reader *reader)
{
    arena_block *b = reader->arena;
    if (!b) return;
    for (arena_block *old = b->next, *next; old; old = next) {
        next = old->next;
        free(old);
    }
    b->next = NULL;
    b->used = 0;
}

static int peek_raw(json_reader *reader)
{
    if (reader->at == reader->have) {
        reader->have = fread(reader->buffer, 1, sizeof reader->buffer, reader->file);
        reader->at = 0;
        if (reader->have == 0) {
            if (ferror(reader->file)) json_fail(reader, "read error: %s", strerror(errno));
            reader->ended = true;
            return -1;
        }
    }
    return reader->buffer[reader->at];
}

static int next_raw(json_reader *reader)
{
    int c = peek_raw(reader);
    if (c < 0) json_fail(reader, "unexpected end of file (the trace is incomplete)");
    reader->at++;
    reader->offset++;
    return c;
}

int json_peek(json_reader *reader)
{
    for (;;) {
        int c = peek_raw(reader);
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c;
        reader->at++;
        reader->offset++;
    }
}

static const char *describe(int c)
{
    static char text[16];
    if (c < 0) return "the end of the file (the trace is incomplete)";
    if (c >= 0x20 && c < 0x7f) snprintf(text, sizeof text, "'%c'", c);
    else snprintf(text, sizeof text, "byte 0x%02x", c);
    return text;
}

void json_expect(json_reader *reader, char c)
{
    int got = json_peek(reader);
    if (got != c) json_fail(reader, "expected '%c', found %s", c, describe(got));
    next_raw(reader);
}

void json_expect_end(json_reader *reader)
{
    int c = json_peek(reader);
    if (c >= 0) json_fail(reader, "unexpected %s after the end of the JSON text", describe(c));
}

static void text_add(json_reader *reader, char c)
{
    if (reader->text_len == reader->text_cap) {
        size_t cap = reader->text_cap ? reader->text_cap * 2 : 256;
        char *grown = realloc(reader->text, cap);
        if (!grown) json_fail(reader, "out of memory");
        reader->text = grown;
        reader->text_cap = cap;
    }
    reader->text[reader->text_len++] = c;
}

static unsigned hex4(json_reader *reader)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = next_raw(reader);
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) json_fail(reader, "bad \\u escape in a string");
        v = v * 16 + (unsigned)d;
    }
    return v;
}

static void text_add_utf8(json_reader *reader, unsigned cp)
{
    if (cp < 0x80) { text_add(reader, (char)cp); return; }
    if (cp < 0x800) { text_add(reader, (char)(0xc0 | cp >> 6)); }
    else {
        if (cp < 0x10000) text_add(reader, (char)(0xe0 | cp >> 12));
        else { text_add(reader, (char)(0xf0 | cp >> 18)); text_add(reader, (char)(0x80 | (cp >> 12 & 0x3f))); }
        text_add(reader, (char)(0x80 | (cp >> 6 & 0x3f)));
    }
    text_add(reader, (char)(0x80 | (cp & 0x3f)));
}

static const char *read_string(json_reader *reader)
{
    json_expect(reader, '"');
    reader->text_len = 0;
    for (;;) {
        int c = next_raw(reader);
        if (c == '"') break;
        if (c < 0x20) json_fail(reader, "control character %s inside a string", describe(c));
        if (c != '\\') { text_add(reader, (char)c); continue; }
        c = next_raw(reader);
        switch (c) {
        case '"': case '\\': case '/': text_add(reader, (char)c); break;
        case 'b': text_add(reader, '\b'); break;
        case 'f': text_add(reader, '\f'); break;
        case 'n': text_add(reader, '\n'); break;
        case 'r': text_add(reader, '\r'); break;
        case 't': text_add(reader, '\t'); break;
        case 'u': {
            unsigned cp = hex4(reader);
            if (cp >= 0xd800 && cp < 0xdc00) {
                if (next_raw(reader) != '\\' || next_raw(reader) != 'u') json_fail(reader, "unpaired surrogate in a string");
                unsigned low = hex4(reader);
                if (low < 0xdc00 || low >= 0xe000) json_fail(reader, "unpaired surrogate in a string");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            }
            text_add_utf8(reader, cp);
            break;
        }
        default: json_fail(reader, "bad escape \\%c in a string", c);
        }
    }
    char *copy = arena_alloc(reader, reader->text_len + 1);
    memcpy(copy, reader->text, reader->text_len);
    copy[reader->text_len] = '\0';
    return copy;
}

const char *json_read_key(json_reader *reader)
{
    if (json_peek(reader) != '"') json_fail(reader, "expected a member name, found %s", describe(json_peek(reader)));
    const char *key = read_string(reader);
    json_expect(reader, ':');
    return key;
}

static void read_literal(json_reader *reader, const char *word)
{
    for (const char *w = word; *w; w++)
        if (next_raw(reader) != *w) json_fail(reader, "expected '%s'", word);
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool valid_number(const char *p)
{
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (is_digit(*p)) while (is_digit(*p)) p++;
    else return false;
    if (*p == '.') {
        if (!is_digit(*++p)) return false;
        while (is_digit(*p)) p++;
    }
    if (*p == 'e' || *p == 'E') {
        if (*++p == '+' || *p == '-') p++;
        if (!is_digit(*p)) return false;
        while (is_digit(*p)) p++;
    }
    return *p == '\0';
}

static double read_number(json_reader *reader)
{
    char digits[64];
    size_t n = 0;
    for (int c = peek_raw(reader); c > 0 && strchr("+-0123456789.eE", c); c = peek_raw(reader)) {
        if (n + 1 >= sizeof digits) json_fail(reader, "number too long");
        digits[n++] = (char)next_raw(reader);
    }
    digits[n] = '\0';
    double v = valid_number(digits) ? strtod(digits, NULL) : NAN;
    if (!isfinite(v)) json_fail(reader, "malformed number '%s'", digits);
    return v;
}

static void stack_push(json_reader *reader, const char *key, const json_value *value)
{
    if (reader->stack_len == reader->stack_cap) {
        size_t cap = reader->stack_cap ? reader->stack_cap * 2 : 64;
        json_value *values = realloc(reader->stack, cap * sizeof *values);
        if (values) reader->stack = values;
        const char **keys = realloc(reader->stack_keys, cap * sizeof *keys);
        if (keys) reader->stack_keys = keys;
        if (!values || !keys) json_fail(reader, "out of memory");
        reader->stack_cap = cap;
    }
    reader->stack_keys[reader->stack_len] = key;
    reader->stack[reader->stack_len++] = *value;
}

static void read_into(json_reader *reader, json_value *v, int depth);

static void read_container(json_reader *reader, json_value *v, int depth, bool object)
{
    if (depth >= MAX_DEPTH) json_fail(reader, "nesting deeper than %d", MAX_DEPTH);
    next_raw(reader);
    size_t base = reader->stack_len;
    char close = object ? '}' : ']';
    if (json_peek(reader) == close) next_raw(reader);
    else for (;;) {
        const char *key = object ? json_read_key(reader) : NULL;
        json_value item;
        read_into(reader, &item, depth + 1);
        stack_push(reader, key, &item);
        int c = json_peek(reader);
        if (c == close) { next_raw(reader); break; }
        if (c != ',') json_fail(reader, "expected ',' or '%c', found %s", close, describe(c));
        next_raw(reader);
    }
    *v = (json_value){ .type = object ? JSON_OBJECT : JSON_ARRAY, .count = reader->stack_len - base };
    v->items = arena_alloc(reader, v->count * sizeof *v->items);
    memcpy(v->items, reader->stack + base, v->count * sizeof *v->items);
    if (object) {
        v->keys = arena_alloc(reader, v->count * sizeof *v->keys);
        memcpy(v->keys, reader->stack_keys + base, v->count * sizeof *v->keys);
    }
    reader->stack_len = base;
}

static void read_into(json_reader *reader, json_value *v, int depth)
{
    int c = json_peek(reader);
    switch (c) {
    case '{': read_container(reader, v, depth, true); break;
    case '[': read_container(reader, v, depth, false); break;
    case '"': *v = (json_value){ .type = JSON_STRING, .text = read_string(reader) }; break;
    case 't': read_literal(reader, "true"); *v = (json_value){ .type = JSON_TRUE }; break;
    case 'f': read_literal(reader, "false"); *v = (json_value){ .type = JSON_FALSE }; break;
    case 'n': read_literal(reader, "null"); *v = (json_value){ .type = JSON_NULL }; break;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) *v = (json_value){ .type = JSON_NUMBER, .number = read_number(reader) };
        else json_fail(reader, "expected a value, found %s", describe(c));
    }
}

json_value *json_read_value(json_reader *reader)
{
    json_value *v = arena_alloc(reader, sizeof *v);
    read_into(reader, v, 0);
    return v;
}

const json_value *json_get(const json_value *object, const char *key)
{
    if (!object || object->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], key) == 0) return &object->items[i];
    return NULL;
}

const char *json_get_string(const json_value *object, const char *key)
{
    const json_value *v = json_get(object, key);
    return v && v->type == JSON_STRING ? v->text : NULL;
}

bool json_as_u64(const json_value *v, uint64_t *out)
{
    if (!v) return false;
    if (v->type == JSON_NUMBER) {
        if (v->number < 0 || v->number >= 18446744073709551616.0 || v->number != floor(v->number)) return false;
        *out = (uint64_t)v->number;
        return true;
    }
    if (v->type == JSON_STRING && v->text[0] == '0' && v->text[1] == 'x' && v->text[2]) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v->text + 2, &end, 16);
        if (*end || errno) return false;
        *out = x;
        return true;
    }
    return false;
}

bool json_get_u64(const json_value *object, const char *key, uint64_t *out)
{
    return json_as_u64(json_get(object, key), out);
}

bool json_get_double(const json_value *object, const char *key, double *out)
{
    const json_value *v = json_get(object, key);
    if (!v || v->type != JSON_NUMBER) return false;
    *out = v->number;
    return true;
}
