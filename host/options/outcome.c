/* host/options/outcome.c -- what a run becomes on the command line: the chunk name of a script
   file, the process exit code of a status, the pending call of a paused result (the
   declarations are in host/options/args.h, beside the parse that uses them). */
#include <stdint.h>
#include <string.h>

#include "host/options/args.h"
#include "moonbox.h"

/* ---------------------------------------------------------------------------------------- */
/* Chunk names and exit codes                                                                */

void mbxH_cli_chunk_name(const char *path, char *buf, size_t size) {
  size_t len = strlen(path);
  const char *tail;
  if (size == 0) return;
  if (len < size) {
    memcpy(buf, path, len + 1);
    return;
  }
  if (size < 4) {
    buf[0] = '\0';
    return;
  }
  tail = path + len - (size - 4);
  while (((unsigned char)*tail & 0xC0) == 0x80)
    tail++; /* start on a character, not inside one */
  memcpy(buf, "...", 3);
  memcpy(buf + 3, tail, strlen(tail) + 1);
}

int mbxH_cli_exit_code_for_exit(int64_t code) {
  if (code >= 0 && code <= 255) return (int)code;
  return 1;
}

int mbxH_cli_exit_code(int status) {
  switch (status) {
  case MBX_OK:
    return 0;
  case MBX_SYNTAX_ERROR:
  case MBX_RUNTIME_ERROR:
    return 1;
  case MBX_INVALID_INPUT:
    return 2;
  case MBX_MEMORY_LIMIT:
  case MBX_INSTRUCTION_LIMIT:
  case MBX_TIME_LIMIT:
  case MBX_OUTPUT_LIMIT:
  case MBX_HOST_CALL_LIMIT:
  case MBX_INTERRUPTED:
  case MBX_SOURCE_TOO_LARGE:
    return 3;
  case MBX_PAUSED:
    return MBXH_CLI_EXIT_PAUSED;
  default:
    /* MBX_INTERNAL_ERROR and API statuses that mean the CLI itself misused the library. */
    return 70;
  }
}

/* ---------------------------------------------------------------------------------------- */
/* The pending call of a paused result                                                       */

/* The end of the JSON array or object starting at p (its closing bracket + 1), or NULL. */
static const char *skip_container(const char *p, const char *end) {
  int depth = 0, in_string = 0;
  for (; p < end; p++) {
    char c = *p;
    if (in_string) {
      if (c == '\\')
        p++; /* the escaped byte cannot end the string */
      else if (c == '"')
        in_string = 0;
    } else if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      depth++;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) return p + 1;
    }
  }
  return NULL;
}

int mbxH_cli_find_pending(const char *json, size_t len, const char **fn, size_t *fn_len,
                          const char **args, size_t *args_len) {
  static const char key[] = "\"pending\":{\"args\":";
  static const char fkey[] = ",\"function\":\"";
  const char *end = json + len, *p, *args_end, *name, *name_end;
  size_t klen = sizeof key - 1, flen = sizeof fkey - 1;
  /* "error" is the only key before "pending" and is null in a paused result, so the first
     occurrence is the member itself (an error message cannot come first). */
  for (p = json; p + klen <= end; p++) {
    if (memcmp(p, key, klen) == 0) break;
  }
  if (p + klen > end) return -1;
  p += klen;
  if (p >= end || *p != '[') return -1;
  args_end = skip_container(p, end);
  if (args_end == NULL || (size_t)(end - args_end) < flen || memcmp(args_end, fkey, flen) != 0)
    return -1;
  name = args_end + flen;
  name_end = memchr(name, '"', (size_t)(end - name));
  if (name_end == NULL || name_end == name) return -1;
  *fn = name;
  *fn_len = (size_t)(name_end - name);
  *args = p;
  *args_len = (size_t)(args_end - p);
  return 0;
}
