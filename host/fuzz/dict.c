/* host/fuzz/dict.c -- the fuzz engine's automatic dictionary: a target's constants. */
#include "host/fuzz/dict.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "host/check.h"
#include "vm/chunk.h"

/*
** Guest `==` on strings compares addresses inside the VM, where no hook sees it, so a magic
** value compared that way can only come from the target's own text: its constants. They are
** read from moonbox's own lua_dump with vm/chunk.c (bounds-checked), never from the source.
*/

typedef struct entry {
  char bytes[MBXH_FUZZ_DICT_WORD_MAX];
  size_t len;
} entry;

typedef struct dict {
  entry *v;
  size_t n;
  int no_memory;
} dict;

static void add(dict *d, const char *s, size_t len) {
  if (len == 0 || len > MBXH_FUZZ_DICT_WORD_MAX || d->n >= MBXH_FUZZ_DICT_MAX || d->no_memory)
    return;
  /* Quadratic in the entries, at most 8192 of them: a one-off at start-up. */
  for (size_t i = 0; i < d->n; i++)
    if (d->v[i].len == len && memcmp(d->v[i].bytes, s, len) == 0) return;
  if (d->v == NULL) {
    d->v = malloc(MBXH_FUZZ_DICT_MAX * sizeof *d->v);
    if (d->v == NULL) {
      d->no_memory = 1;
      return;
    }
  }
  memcpy(d->v[d->n].bytes, s, len);
  d->v[d->n++].len = len;
}

/* Depth is bounded by the reader (MBXV_CHUNK_MAX_DEPTH). */
static void collect(const mbxV_chunk_proto *p, dict *d) {
  char text[64];
  for (size_t i = 0; i < p->nk; i++) {
    const mbxV_chunk_const *k = &p->k[i];
    switch (k->type) {
    case MBXV_K_SHORTSTR:
    case MBXV_K_LONGSTR:
      if (k->s) add(d, k->s, k->len);
      break;
    case MBXV_K_INT: {
      int n = snprintf(text, sizeof text, "%" PRId64, k->i);
      add(d, text, (size_t)n);
      if (k->i >= 0 && k->i <= 255) {
        char byte = (char)k->i;
        add(d, &byte, 1);
      }
      break;
    }
    case MBXV_K_FLOAT: {
      int n = snprintf(text, sizeof text, "%.17g", k->n);
      for (int prec = 1; prec < 17; prec++) { /* the shortest that reads back the same */
        char shorter[64];
        int m = snprintf(shorter, sizeof shorter, "%.*g", prec, k->n);
        if (strtod(shorter, NULL) == k->n) {
          memcpy(text, shorter, (size_t)m + 1);
          n = m;
          break;
        }
      }
      add(d, text, (size_t)n);
      break;
    }
    default:
      break;
    }
  }
  /* Small integers never reach the constant table: `x == 109` is EQI with 109 in the
     instruction (sB, offset by 127), `local x = 109` is LOADI (sBx). */
  for (size_t i = 0; i < p->ncode; i++) {
    uint32_t ins = p->code[i];
    long v;
    switch (mbxV_op(ins)) {
    case MBXV_OP_EQI:
    case MBXV_OP_LTI:
    case MBXV_OP_LEI:
    case MBXV_OP_GTI:
    case MBXV_OP_GEI:
      v = (long)mbxV_arg_b(ins) - 127;
      break;
    case MBXV_OP_LOADI:
      v = mbxV_arg_sbx(ins);
      break;
    default:
      continue;
    }
    int n = snprintf(text, sizeof text, "%ld", v);
    add(d, text, (size_t)n);
    if (v >= 0 && v <= 255) {
      char byte = (char)v;
      add(d, &byte, 1);
    }
  }
  for (size_t i = 0; i < p->nprotos; i++)
    collect(&p->protos[i], d);
}

static void put_entry(FILE *f, const entry *e) {
  fputc('"', f);
  for (size_t i = 0; i < e->len; i++) {
    unsigned char c = (unsigned char)e->bytes[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
      fputc(c, f);
    else
      fprintf(f, "\\x%02X", c);
  }
  fputs("\"\n", f);
}

int mbxH_fuzz_dict_write(const mbx_policy *p, const char *code, size_t len, FILE *f,
                         mbx_error *err) {
  char *dump;
  size_t dump_len;
  if (mbxH_check_dump(p, code, len, &dump, &dump_len, err) != MBX_OK) return -1;
  mbxV_chunk chunk;
  char why[160];
  int rc = mbxV_chunk_read(dump, dump_len, &chunk, why, sizeof why);
  if (rc != 0) {
    free(dump);
    mbxU_error_set(err, rc == -2 ? MBX_NO_MEMORY : MBX_INTERNAL_ERROR,
                   "reading the compiled chunk failed: %s", why);
    return -1;
  }
  dict d = {0};
  collect(&chunk.main, &d);
  mbxV_chunk_free(&chunk);
  free(dump); /* the constants pointed into it: copied into d first */
  if (d.no_memory) {
    free(d.v);
    mbxU_error_set(err, MBX_NO_MEMORY, "out of host memory");
    return -1;
  }
  for (size_t i = 0; i < d.n; i++)
    put_entry(f, &d.v[i]);
  free(d.v);
  return (int)d.n;
}
