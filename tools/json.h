/* A small streaming JSON reader for traces, which may be larger than memory.
 *
 * The caller walks the outer structure itself (json_expect, json_peek, json_read_key) and
 * reads each inner value, such as one trace event, as a tree with json_read_value. Trees
 * live in the reader's arena until json_arena_reset. Malformed or truncated input stops the
 * reader: every call then longjmps to the caller's json_catch point, and json_error() says
 * "FILE: offset N: what was expected". */
#ifndef LMS_TOOLS_JSON_H
#define LMS_TOOLS_JSON_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    double number;             /* JSON_NUMBER */
    const char *text;          /* JSON_STRING (NUL-terminated; may hold \u0000 as a NUL) */
    size_t count;              /* JSON_ARRAY, JSON_OBJECT: members */
    json_value *items;         /* [count] */
    const char **keys;         /* JSON_OBJECT: [count] */
};

typedef struct json_reader json_reader;

/* NULL with a message in err when the file cannot be opened. "-" is standard input, kept in a
 * temporary file so that it can be opened again. */
json_reader *json_open(const char *path, char *err, size_t err_len);
void json_close(json_reader *reader);

/* Where errors return: use as  if (setjmp(*json_catch(reader))) { report json_error(reader) } */
jmp_buf *json_catch(json_reader *reader);
const char *json_error(const json_reader *reader);
/* Whether a read found the end of the input: after an error, the input was cut short. */
bool json_ended(const json_reader *reader);
uint64_t json_offset(const json_reader *reader);   /* bytes consumed */
const char *json_path(const json_reader *reader);  /* as errors name it */
/* Stops with a message about the input at the current offset. */
_Noreturn void json_fail(json_reader *reader, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The next character after whitespace, not consumed; -1 at the end of the file. */
int json_peek(json_reader *reader);
void json_expect(json_reader *reader, char c);
/* After '{' or ',': "key" and ':'; the key lives until the next json_arena_reset. */
const char *json_read_key(json_reader *reader);
json_value *json_read_value(json_reader *reader);
/* Fails unless only whitespace is left. */
void json_expect_end(json_reader *reader);
void json_arena_reset(json_reader *reader);

/* Accessors: NULL or false when absent or of another type. */
const json_value *json_get(const json_value *object, const char *key);
const char *json_get_string(const json_value *object, const char *key);
bool json_get_u64(const json_value *object, const char *key, uint64_t *out);
bool json_get_double(const json_value *object, const char *key, double *out);
/* A number, or a string "0x..." (how traces write addresses). */
bool json_as_u64(const json_value *value, uint64_t *out);

#endif
