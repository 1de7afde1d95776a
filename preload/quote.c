#include "preload/quote.h"

#include <stdio.h>
#include <string.h>

const char *lms_quote(const char *text, char *buf)
{
    static const char named[] = "\a\b\t\n\v\f\r\\", letters[] = "abtnvfr\\";
    size_t out = 0, shown = strnlen(text, LMS_QUOTE_SHOWN), length = shown + strlen(text + shown);
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)text[i];
        const char *escape = c ? strchr(named, c) : NULL;
        if (escape) buf[out++] = '\\', buf[out++] = letters[escape - named];
        else if (c < 0x20 || c == 0x7f) out += (size_t)snprintf(buf + out, 5, "\\x%02x", c);
        else buf[out++] = (char)c;
    }
    if (length > shown) snprintf(buf + out, LMS_QUOTE_SIZE - out, "...(%zu bytes, cut)", length);
    else buf[out] = '\0';
    return buf;
}
