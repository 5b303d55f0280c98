#include "json.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *p;
} reader_t;

static void skip_space(reader_t *r) {
  while (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r') ++r->p;
}

static void clear(json_value_t *v) {
  if (v->type == JSON_STRING) free(v->string);
  if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
    for (size_t i = 0; i < v->count; ++i) {
      clear(&v->items[i]);
      if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
  }
  memset(v, 0, sizeof *v);
}

static bool parse_value(reader_t *r, json_value_t *out, int depth);

static char *parse_string(reader_t *r) {
  if (*r->p != '"') return NULL;
  ++r->p;
  size_t cap = 16, n = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  while (*r->p && *r->p != '"') {
    char ch = *r->p++;
    if (ch == '\\') {
      const char e = *r->p++;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          ch = e;
          break;
        case 'b':
          ch = '\b';
          break;
        case 'f':
          ch = '\f';
          break;
        case 'n':
          ch = '\n';
          break;
        case 'r':
          ch = '\r';
          break;
        case 't':
          ch = '\t';
          break;
        case 'u': {
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            const char h = *r->p++;
            code <<= 4;
            if (h >= '0' && h <= '9')
              code |= (unsigned)(h - '0');
            else if (h >= 'a' && h <= 'f')
              code |= (unsigned)(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              code |= (unsigned)(h - 'A' + 10);
            else {
              free(s);
              return NULL;
            }
          }
          ch = code < 0x80 ? (char)code : '?';
          break;
        }
        default:
          free(s);
          return NULL;
      }
    }
    if (n + 1 >= cap) {
      cap *= 2;
      char *bigger = realloc(s, cap);
      if (!bigger) {
        free(s);
        return NULL;
      }
      s = bigger;
    }
    s[n++] = ch;
  }
  if (*r->p != '"') {
    free(s);
    return NULL;
  }
  ++r->p;
  s[n] = '\0';
  return s;
}

/* Appends a zeroed member to an array or object. */
static json_value_t *append(json_value_t *v, char *key) {
  json_value_t *items = realloc(v->items, (v->count + 1) * sizeof *items);
  if (!items) return NULL;
  v->items = items;
  if (v->type == JSON_OBJECT) {
    char **keys = realloc(v->keys, (v->count + 1) * sizeof *keys);
    if (!keys) return NULL;
    v->keys = keys;
    v->keys[v->count] = key;
  }
  memset(&v->items[v->count], 0, sizeof v->items[0]);
  return &v->items[v->count++];
}

static bool parse_container(reader_t *r, json_value_t *out, int depth, bool object) {
  const char close = object ? '}' : ']';
  out->type = object ? JSON_OBJECT : JSON_ARRAY;
  ++r->p;
  skip_space(r);
  if (*r->p == close) {
    ++r->p;
    return true;
  }
  for (;;) {
    char *key = NULL;
    if (object) {
      skip_space(r);
      key = parse_string(r);
      if (!key) return false;
      skip_space(r);
      if (*r->p != ':') {
        free(key);
        return false;
      }
      ++r->p;
    }
    json_value_t *item = append(out, key);
    if (!item) {
      free(key);
      return false;
    }
    if (!parse_value(r, item, depth + 1)) return false;
    skip_space(r);
    if (*r->p == ',') {
      ++r->p;
      continue;
    }
    if (*r->p == close) {
      ++r->p;
      return true;
    }
    return false;
  }
}

static bool parse_value(reader_t *r, json_value_t *out, int depth) {
  if (depth > 64) return false;
  skip_space(r);
  const char c = *r->p;
  if (c == '{' || c == '[') return parse_container(r, out, depth, c == '{');
  if (c == '"') {
    out->string = parse_string(r);
    if (!out->string) return false;
    out->type = JSON_STRING;
    return true;
  }
  if (strncmp(r->p, "true", 4) == 0 || strncmp(r->p, "false", 5) == 0) {
    out->type = JSON_BOOL;
    out->boolean = c == 't';
    r->p += out->boolean ? 4 : 5;
    return true;
  }
  if (strncmp(r->p, "null", 4) == 0) {
    out->type = JSON_NULL;
    r->p += 4;
    return true;
  }
  char *end = NULL;
  out->number = strtod(r->p, &end);
  if (end == r->p) return false;
  out->type = JSON_NUMBER;
  r->p = end;
  return true;
}

json_value_t *json_parse(const char *text) {
  if (!text) return NULL;
  json_value_t *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  reader_t r = {text};
  if (!parse_value(&r, v, 0)) {
    json_free(v);
    return NULL;
  }
  skip_space(&r);
  if (*r.p != '\0') {
    json_free(v);
    return NULL;
  }
  return v;
}

void json_free(json_value_t *v) {
  if (!v) return;
  clear(v);
  free(v);
}

const json_value_t *json_get(const json_value_t *object, const char *key) {
  if (!object || object->type != JSON_OBJECT) return NULL;
  for (size_t i = 0; i < object->count; ++i) {
    if (strcmp(object->keys[i], key) == 0) return &object->items[i];
  }
  return NULL;
}

const char *json_string(const json_value_t *object, const char *key) {
  const json_value_t *v = json_get(object, key);
  return v && v->type == JSON_STRING ? v->string : "";
}

char *json_quote(const char *s) {
  /* At most 6 bytes per input byte (\u00XX), the quotes and the NUL. */
  const size_t len = s ? strlen(s) : 0;
  char *out = malloc(len * 6 + 5);
  if (!out) return NULL;
  if (!s) {
    memcpy(out, "null", 5);
    return out;
  }
  static const char hex[] = "0123456789abcdef";
  char *w = out;
  *w++ = '"';
  for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
    switch (*p) {
      case '"':
        *w++ = '\\', *w++ = '"';
        break;
      case '\\':
        *w++ = '\\', *w++ = '\\';
        break;
      case '\n':
        *w++ = '\\', *w++ = 'n';
        break;
      case '\r':
        *w++ = '\\', *w++ = 'r';
        break;
      case '\t':
        *w++ = '\\', *w++ = 't';
        break;
      default:
        if (*p < 0x20) {
          *w++ = '\\', *w++ = 'u', *w++ = '0', *w++ = '0';
          *w++ = hex[*p >> 4], *w++ = hex[*p & 15];
        } else {
          *w++ = (char)*p; /* UTF-8 passes through */
        }
    }
  }
  *w++ = '"';
  *w = '\0';
  return out;
}
