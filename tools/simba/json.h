/* A small JSON reader for the library's own JSON (snapshots, inspect): enough
 * to read it back, not a general-purpose parser (no \u escapes beyond ASCII). */
#ifndef SIMBA_TOOLS_JSON_H
#define SIMBA_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
  JSON_NULL,
  JSON_BOOL,
  JSON_NUMBER,
  JSON_STRING,
  JSON_ARRAY,
  JSON_OBJECT
} json_type_t;

typedef struct json_value {
  json_type_t type;
  bool boolean;
  double number;
  char *string;             /* JSON_STRING */
  struct json_value *items; /* JSON_ARRAY and JSON_OBJECT members */
  char **keys;              /* JSON_OBJECT: keys[i] names items[i] */
  size_t count;
} json_value_t;

/* Parses `text`; NULL if it is not valid JSON (or out of memory). */
json_value_t *json_parse(const char *text);
void json_free(json_value_t *v);

/* The member `key` of an object, or NULL. */
const json_value_t *json_get(const json_value_t *object, const char *key);
/* The string member `key`, or "" when absent or not a string. */
const char *json_string(const json_value_t *object, const char *key);

/* `s` as a JSON string literal with its quotes ("null" for NULL), to free with
 * free(); NULL when out of memory. */
char *json_quote(const char *s);

#endif
