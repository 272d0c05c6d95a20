/*
 * Reads an op's attributes: one flat JSON object as the harness writes it (numbers, strings,
 * booleans; nested values are skipped). A malformed object fails the call naming the attribute,
 * never reads past the string.
 */
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

static const char *space(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* Past a JSON string starting at its opening quote; NULL if it never closes. */
static const char *skip_string(const char *p) {
  for (p++; *p != '\0'; p++) {
    if (*p == '\\' && p[1] != '\0') p++;
    else if (*p == '"') return p + 1;
  }
  return NULL;
}

/* Past one JSON value; NULL if it is malformed. */
static const char *skip_value(const char *p) {
  p = space(p);
  if (*p == '"') return skip_string(p);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    for (; *p != '\0'; p++) {
      if (*p == '"') {
        p = skip_string(p);
        if (p == NULL) return NULL;
        p--;
      } else if (*p == '{' || *p == '[') {
        depth++;
      } else if ((*p == '}' || *p == ']') && --depth == 0) {
        return p + 1;
      }
    }
    return NULL;
  }
  const char *start = p;
  while (*p != '\0' && *p != ',' && *p != '}' && *p != ' ' && *p != '\n') p++;
  return p == start ? NULL : p;
}

/* The value of `key` in the top-level object: 1 (and *value) found, 0 absent, -1 malformed. */
static int find(const char *json, const char *key, const char **value) {
  const char *p = space(json);
  if (*p != '{') return -1;
  p = space(p + 1);
  if (*p == '}') return 0;
  const size_t key_length = strlen(key);
  for (;;) {
    if (*p != '"') return -1;
    const char *name = p + 1;
    const char *end = skip_string(p);
    if (end == NULL) return -1;
    p = space(end);
    if (*p != ':') return -1;
    p = space(p + 1);
    if ((size_t)(end - 1 - name) == key_length && strncmp(name, key, key_length) == 0) {
      *value = p;
      return 1;
    }
    p = skip_value(p);
    if (p == NULL) return -1;
    p = space(p);
    if (*p == '}') return 0;
    if (*p != ',') return -1;
    p = space(p + 1);
  }
}

int attr_number(const char *json, const char *key, double *value) {
  const char *p;
  const int found = find(json, key, &p);
  if (found <= 0) return found < 0 ? -fail("attributes: not a flat JSON object: %.80s", json) : 0;
  if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
    *value = *p == 't';
    return 1;
  }
  char *end;
  *value = strtod(p, &end);
  if (end == p) return -fail("attribute %s: not a number", key);
  return 1;
}

int attr_string(const char *json, const char *key, char *value, size_t size) {
  const char *p;
  const int found = find(json, key, &p);
  if (found <= 0) return found < 0 ? -fail("attributes: not a flat JSON object: %.80s", json) : 0;
  const char *end = *p == '"' ? skip_string(p) : NULL;
  if (end == NULL) return -fail("attribute %s: not a string", key);
  const size_t length = (size_t)(end - p - 2);
  if (length >= size) return -fail("attribute %s: longer than %zu characters", key, size - 1);
  memcpy(value, p + 1, length);
  value[length] = '\0';
  return 1;
}

int need_number(const char *json, const char *key, double *value) {
  const int found = attr_number(json, key, value);
  if (found == 0) return fail("attribute %s is required", key);
  return found < 0;
}

int need_int(const char *json, const char *key, int64_t *value) {
  double number;
  if (need_number(json, key, &number)) return 1;
  if (number != (double)(int64_t)number) return fail("attribute %s: not an integer", key);
  *value = (int64_t)number;
  return 0;
}

int attrs_only(const char *json, const char *const *keys) {
  const char *p = space(json);
  if (*p != '{') return fail("attributes: not a JSON object: %.80s", json);
  p = space(p + 1);
  if (*p == '}') return 0;
  for (;;) {
    if (*p != '"') return fail("attributes: not a flat JSON object: %.80s", json);
    const char *name = p + 1;
    const char *end = skip_string(p);
    if (end == NULL) return fail("attributes: not a flat JSON object: %.80s", json);
    const size_t length = (size_t)(end - 1 - name);
    int known = 0;
    for (const char *const *key = keys; !known && *key != NULL; key++) known = strlen(*key) == length && strncmp(*key, name, length) == 0;
    if (!known) return fail("attribute %.*s: this op takes no such attribute", (int)length, name);
    p = space(end);
    if (*p != ':' || (p = skip_value(p + 1)) == NULL) return fail("attributes: not a flat JSON object: %.80s", json);
    p = space(p);
    if (*p == '}') return 0;
    if (*p != ',') return fail("attributes: not a flat JSON object: %.80s", json);
    p = space(p + 1);
  }
}
