/* host/check.c -- mbx_check: the static check of a script against a policy (nothing runs). */
#include <locale.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "capabilities/policy.h"
#include "common/error.h"
#include "common/buf.h"
#include "host/check.h"
#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/chunk.h"
#include "vm/cstack.h"
#include "vm/errors.h"
#include "vm/json_text.h"
#include "vm/load.h"
#include "vm/vm.h"

/*
** The check compiles the code exactly as mbx_run would (vm/load.c: text only, the parser fed
** in pieces with the budget polled between them), in a throwaway state that has the policy's
** memory, instruction and time limits, then reads the
** lua_dump of the compiled function with vm/chunk.c. Globals are the indexing instructions
** whose table is the chunk's _ENV with a constant key (GETTABUP/SETTABUP, and past 255
** constants GETUPVAL + LOADK + GETTABLE/SETTABLE: walk() below): _ENV is the main function's
** first upvalue, and in a nested function an upvalue that the enclosing function passes down
** from its own _ENV upvalue (a `local _ENV = t` is a register, so accesses through it are not
** globals). A name
** a new sandbox's _G holds (list_builtins), or the first part of a function the policy
** grants, is provided.
** Dynamic accesses (_ENV[k] with a computed k, rawget(_G, k), load) cannot be seen in the
** bytecode and are not reported.
*/

/* One finding. */
typedef struct finding {
  const char *name; /* borrowed from the dump */
  size_t len;
  int line;
  int write;
} finding;

typedef struct check_state {
  const char *code;
  size_t len;
  mbxU_buf dump;
  char *syntax;
  size_t syntax_len;
  char **provided; /* builtins only: the library's global names (host memory) */
  size_t nprovided;
  int no_memory;
} check_state;

static int dump_writer(lua_State *L, const void *p, size_t n, void *ud) {
  (void)L;
  mbxU_buf *b = ud;
  mbxU_buf_put(b, p, n);
  return b->failed;
}

/* Protected: the names in _G, copied to host memory. */
static int step_globals(lua_State *L) {
  check_state *st = lua_touserdata(L, 1);
  lua_settop(L, 0);
  lua_pushglobaltable(L);
  size_t cap = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) continue;
    if (st->nprovided == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      char **grown = realloc(st->provided, ncap * sizeof *grown);
      if (grown == NULL) {
        st->no_memory = 1;
        return 0;
      }
      st->provided = grown;
      cap = ncap;
    }
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    char *copy = malloc(n + 1);
    if (copy == NULL) {
      st->no_memory = 1;
      return 0;
    }
    memcpy(copy, s, n + 1);
    st->provided[st->nprovided++] = copy;
  }
  return 0;
}

/* Protected: compile (vm/load.c, under the budget) and dump with the debug information. */
static int step_compile(lua_State *L) {
  check_state *st = lua_touserdata(L, 1);
  lua_settop(L, 0);
  if (mbxV_load_text(L, st->code, st->len, "=input") != LUA_OK) {
    size_t n = 0;
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    if (msg == NULL) msg = "syntax error";
    if (n == 0) n = strlen(msg);
    st->syntax = malloc(n + 1);
    if (st->syntax == NULL) {
      st->no_memory = 1;
      return 0;
    }
    memcpy(st->syntax, msg, n);
    st->syntax[n] = '\0';
    st->syntax_len = n;
    return 0;
  }
  if (lua_dump(L, dump_writer, &st->dump, 0) != 0 || st->dump.failed) st->no_memory = 1;
  return 0;
}

static int is_provided(const check_state *st, const mbx_policy *p, const char *s, size_t n) {
  for (size_t i = 0; i < st->nprovided; i++)
    if (strlen(st->provided[i]) == n && memcmp(st->provided[i], s, n) == 0) return 1;
  for (size_t i = 0; i < p->host_fns.count; i++) {
    const char *name = p->host_fns.fns[i].name;
    size_t first = strcspn(name, ".");
    if (first == n && memcmp(name, s, n) == 0) return 1;
  }
  return 0;
}

typedef struct findings {
  finding *v;
  size_t n, cap;
  int no_memory;
  /* The register tracking of walk(), shared by every function (one is walked at a time, its
     children after it), so the recursion's frames stay small. */
  unsigned char reg_env[256];
  long reg_key[256];
} findings;

static void add_finding(findings *f, const mbxV_chunk_const *k, int line, int write) {
  if (f->no_memory) return;
  if (f->n == f->cap) {
    size_t ncap = f->cap ? f->cap * 2 : 16;
    finding *grown = realloc(f->v, ncap * sizeof *grown);
    if (grown == NULL) {
      f->no_memory = 1;
      return;
    }
    f->v = grown;
    f->cap = ncap;
  }
  f->v[f->n++] = (finding){k->s, k->len, line, write};
}

/* Whether op writes registers from A up (so what they held is gone). The compiler keeps
   temporaries stack-like: a write to A ends the life of every temporary above A too. */
static int writes_registers(unsigned op) {
  switch (op) {
  case MBXV_OP_SETTABUP:
  case MBXV_OP_SETTABLE:
  case MBXV_OP_SETI:
  case MBXV_OP_SETFIELD:
  case MBXV_OP_SETUPVAL:
  case MBXV_OP_MMBIN:
  case MBXV_OP_MMBINI:
  case MBXV_OP_MMBINK:
  case MBXV_OP_CLOSE:
  case MBXV_OP_TBC:
  case MBXV_OP_JMP:
  case MBXV_OP_EQ:
  case MBXV_OP_LT:
  case MBXV_OP_LE:
  case MBXV_OP_EQK:
  case MBXV_OP_EQI:
  case MBXV_OP_LTI:
  case MBXV_OP_LEI:
  case MBXV_OP_GTI:
  case MBXV_OP_GEI:
  case MBXV_OP_TEST:
  case MBXV_OP_RETURN:
  case MBXV_OP_RETURN0:
  case MBXV_OP_RETURN1:
  case MBXV_OP_SETLIST:
  case MBXV_OP_VARARGPREP:
  case MBXV_OP_EXTRAARG:
    return 0;
  default:
    return 1;
  }
}

/* The string constant k[idx], or NULL. */
static const mbxV_chunk_const *kstr(const mbxV_chunk_proto *f, size_t idx) {
  if (idx >= f->nk) return NULL;
  const mbxV_chunk_const *k = &f->k[idx];
  if ((k->type != MBXV_K_SHORTSTR && k->type != MBXV_K_LONGSTR) || k->s == NULL) return NULL;
  return k;
}

#define NO_KEY (-1L)

/* env[i]: upvalue i of f is the chunk's _ENV. Depth is bounded by the reader
   (MBXV_CHUNK_MAX_DEPTH).
   GETTABUP/SETTABUP name a global when their key's constant index fits in 8 bits. Past 255
   constants the compiler loads _ENV into a register (GETUPVAL) and the key into another
   (LOADK/LOADKX), then indexes with GETTABLE/SETTABLE (GETFIELD/SETFIELD/SELF for `(_ENV).x`
   and `_ENV:f()`): registers are followed along the straight line for that. */
static void walk(const mbxV_chunk_proto *f, const unsigned char *env, findings *out) {
  unsigned char *reg_env = out->reg_env;
  long *reg_key = out->reg_key;
  memset(reg_env, 0, sizeof out->reg_env);
  for (size_t r = 0; r < 256; r++)
    reg_key[r] = NO_KEY;
  for (size_t pc = 0; pc < f->ncode && !out->no_memory; pc++) {
    uint32_t i = f->code[pc];
    unsigned op = mbxV_op(i), a = mbxV_arg_a(i), b = mbxV_arg_b(i), c = mbxV_arg_c(i);
    int line = f->lines ? f->lines[pc] : 0;
    const mbxV_chunk_const *k = NULL;
    int write = 0;
    switch (op) {
    case MBXV_OP_GETTABUP:
      if (b < f->nupvals && env[b]) k = kstr(f, c);
      break;
    case MBXV_OP_SETTABUP:
      if (a < f->nupvals && env[a]) k = kstr(f, b);
      write = 1;
      break;
    case MBXV_OP_GETTABLE:
      if (reg_env[b] && reg_key[c] != NO_KEY) k = kstr(f, (size_t)reg_key[c]);
      break;
    case MBXV_OP_SETTABLE:
      if (reg_env[a] && reg_key[b] != NO_KEY) k = kstr(f, (size_t)reg_key[b]);
      write = 1;
      break;
    case MBXV_OP_GETFIELD:
      if (reg_env[b]) k = kstr(f, c);
      break;
    case MBXV_OP_SETFIELD:
      if (reg_env[a]) k = kstr(f, b);
      write = 1;
      break;
    case MBXV_OP_SELF:
      if (reg_env[b])
        k = mbxV_arg_k(i) ? kstr(f, c) : reg_key[c] != NO_KEY ? kstr(f, (size_t)reg_key[c]) : NULL;
      break;
    default:
      break;
    }
    if (k) add_finding(out, k, line, write);
    if (writes_registers(op))
      for (unsigned r = a; r < 256; r++) {
        reg_env[r] = 0;
        reg_key[r] = NO_KEY;
      }
    if (op == MBXV_OP_GETUPVAL && b < f->nupvals && env[b])
      reg_env[a] = 1;
    else if (op == MBXV_OP_LOADK)
      reg_key[a] = (long)mbxV_arg_bx(i);
    else if (op == MBXV_OP_LOADKX && pc + 1 < f->ncode &&
             mbxV_op(f->code[pc + 1]) == MBXV_OP_EXTRAARG)
      reg_key[a] = (long)mbxV_arg_ax(f->code[pc + 1]);
  }
  for (size_t ch = 0; ch < f->nprotos && !out->no_memory; ch++) {
    const mbxV_chunk_proto *child = &f->protos[ch];
    unsigned char *cenv = calloc(child->nupvals ? child->nupvals : 1, 1);
    if (cenv == NULL) {
      out->no_memory = 1;
      return;
    }
    for (size_t u = 0; u < child->nupvals; u++) {
      const mbxV_chunk_upval *uv = &child->upvals[u];
      cenv[u] = !uv->instack && uv->idx < f->nupvals && env[uv->idx];
    }
    walk(child, cenv, out);
    free(cenv);
  }
}

static int by_line(const void *a, const void *b) {
  const finding *x = a, *y = b;
  if (x->line != y->line) return x->line < y->line ? -1 : 1;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->name, y->name, n);
  if (c != 0) return c;
  if (x->len != y->len) return x->len < y->len ? -1 : 1;
  return x->write - y->write;
}

static void put_int(mbxU_buf *b, long long v) {
  mbxV_json_put_integer(mbxU_buf_sink, b, v);
}

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;
static void make_c_locale(void) {
  c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static void clear_state(check_state *st) {
  mbxU_buf_free(&st->dump);
  free(st->syntax);
  for (size_t i = 0; i < st->nprovided; i++)
    free(st->provided[i]);
  free(st->provided);
}

static int run_step(lua_State *L, lua_CFunction fn, check_state *st) {
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, st);
  return lua_pcall(L, 1, 0, 0);
}

/* The global names of the sandbox's standard library: the same for every policy (templates
   are built without one; granted functions are added per policy, see is_provided), so they
   are listed once per process, from a state opened as a template is. The compile itself
   needs no library. */
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;
static check_state builtins;
static int builtins_ok;

static void list_builtins(void) {
  mbxV_config cfg = {.memory_limit = 64u << 20, .output_limit = 1u << 20, .source_limit = 0};
  mbxV_vm vm;
  if (!mbxV_vm_open(&vm, &cfg)) return;
  /* Protected calls only: an error cannot escape to the panic handler here. */
  lua_pushcfunction(vm.L, mbxL_open_sandbox);
  builtins_ok = lua_pcall(vm.L, 0, 0, 0) == LUA_OK &&
                run_step(vm.L, step_globals, &builtins) == LUA_OK && !builtins.no_memory;
  mbxV_vm_close(&vm);
}

/* The compile in its throwaway state; fills st. Returns MBX_OK, a limit's status or
   MBX_NO_MEMORY with err filled. */
static mbx_status compile(const mbx_policy *p, check_state *st, mbx_error *err) {
  mbxV_config cfg = {.memory_limit = (size_t)p->memory,
                     .instruction_limit = p->instructions,
                     .time_limit_ms = p->time_ms,
                     .output_limit = (size_t)p->output,
                     .source_limit = (size_t)p->source,
                     .result_limit = (size_t)p->result};
  mbxV_vm vm;
  if (!mbxV_vm_open(&vm, &cfg)) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_check: out of host memory");
    return MBX_NO_MEMORY;
  }
  lua_State *L = vm.L;
  volatile mbx_status s = MBX_OK;
  jmp_buf recovery;
  vm.panic_jmp = &recovery;
  if (setjmp(recovery) != 0) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR,
                   "mbx_check: an error escaped the check's "
                   "protected calls");
    s = MBX_INTERNAL_ERROR;
    goto done;
  }
  /* The parse's work and memory are the guest's, metered like mbx_run's (parse time counts
     against the time limit there too). */
  mbxV_budget_start(L);
  int rc = run_step(L, step_compile, st);
  mbxV_trip trip = mbxV_tripped(L);
  mbxV_budget_stop(L);
  if (trip == MBXV_TRIP_NONE && (rc == LUA_ERRMEM || vm.heap.refused)) trip = MBXV_TRIP_MEMORY;
  if (trip != MBXV_TRIP_NONE) {
    char why[MBXV_TRIP_MESSAGE_MAX];
    mbxV_trip_message(L, trip, why, sizeof why);
    s = trip == MBXV_TRIP_TIME           ? MBX_TIME_LIMIT
        : trip == MBXV_TRIP_INSTRUCTIONS ? MBX_INSTRUCTION_LIMIT
        : trip == MBXV_TRIP_INTERRUPT    ? MBX_INTERRUPTED
                                         : MBX_MEMORY_LIMIT;
    mbxU_error_set(err, s, "mbx_check: compiling stopped: %s", why);
    goto done;
  }
  if (rc != LUA_OK || st->no_memory) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_check: out of host memory while compiling");
    s = MBX_NO_MEMORY;
  }
done:
  vm.panic_jmp = NULL;
  mbxV_vm_close(&vm);
  return s;
}

/* The report of a compiled chunk. */
static mbx_status report_globals(const mbx_policy *p, check_state *st, mbxU_buf *out,
                                 mbx_error *err) {
  mbxV_chunk chunk;
  char why[160];
  int rc = mbxV_chunk_read(st->dump.data, st->dump.len, &chunk, why, sizeof why);
  if (rc != 0) {
    /* The bytes are our own lua_dump: a refusal here is a bug in the reader or the build. */
    mbxU_error_set(err, rc == -2 ? MBX_NO_MEMORY : MBX_INTERNAL_ERROR,
                   "mbx_check: reading the compiled chunk failed: %s", why);
    return rc == -2 ? MBX_NO_MEMORY : MBX_INTERNAL_ERROR;
  }
  findings *f = calloc(1, sizeof *f);
  /* lua_load gives the main function's first upvalue the global table. */
  unsigned char *env = calloc(chunk.main.nupvals ? chunk.main.nupvals : 1, 1);
  if (env == NULL || f == NULL) {
    free(env);
    free(f);
    mbxV_chunk_free(&chunk);
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_check: out of host memory");
    return MBX_NO_MEMORY;
  }
  if (chunk.main.nupvals) env[0] = 1;
  walk(&chunk.main, env, f);
  free(env);
  size_t kept = 0;
  for (size_t i = 0; i < f->n; i++)
    if (!is_provided(&builtins, p, f->v[i].name, f->v[i].len)) f->v[kept++] = f->v[i];
  f->n = kept;
  if (f->n) qsort(f->v, f->n, sizeof *f->v, by_line);
  mbxU_buf_puts(out, "{\"globals\":[");
  size_t shown = 0;
  for (size_t i = 0; i < f->n; i++) {
    if (i > 0 && by_line(&f->v[i - 1], &f->v[i]) == 0) continue; /* same name, line, access */
    if (shown++) mbxU_buf_puts(out, ",");
    mbxU_buf_puts(out, f->v[i].write ? "{\"access\":\"write\",\"line\":"
                                     : "{\"access\":\"read\",\"line\":");
    put_int(out, f->v[i].line);
    mbxU_buf_puts(out, ",\"name\":");
    mbxV_json_put_string(mbxU_buf_sink, out, f->v[i].name, f->v[i].len);
    mbxU_buf_puts(out, "}");
  }
  mbxU_buf_puts(out, shown ? "],\"ok\":false,\"syntax_error\":null}"
                           : "],\"ok\":true,\"syntax_error\":null}");
  int no_memory = f->no_memory;
  free(f->v);
  free(f);
  mbxV_chunk_free(&chunk);
  if (no_memory) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_check: out of host memory");
    return MBX_NO_MEMORY;
  }
  return MBX_OK;
}

static void report_syntax(const check_state *st, mbxU_buf *out) {
  char chunk[64];
  int line = 0;
  size_t text = 0;
  if (!mbxV_error_split(st->syntax, st->syntax_len, chunk, sizeof chunk, &line, &text)) {
    line = 0;
    text = 0;
  }
  size_t n = mbxV_utf8_cut(st->syntax + text, st->syntax_len - text, MBXV_ERROR_MAX);
  mbxU_buf_puts(out, "{\"globals\":[],\"ok\":false,\"syntax_error\":{\"line\":");
  put_int(out, line);
  mbxU_buf_puts(out, ",\"message\":");
  mbxV_json_put_string(mbxU_buf_sink, out, st->syntax + text, n);
  mbxU_buf_puts(out, "}}");
}

MBX_API mbx_status mbx_check(const mbx_policy *p, const char *code, size_t len, char **json,
                             size_t *json_len, mbx_error *err) {
  if (json) *json = NULL;
  if (json_len) *json_len = 0;
  if (p == NULL || json == NULL || (code == NULL && len > 0)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_check: %s is NULL",
                   p == NULL      ? "the policy"
                   : json == NULL ? "json"
                                  : "code (with a length)");
    return MBX_INVALID_ARGUMENT;
  }
  if (len > p->source) {
    mbxU_error_set(err, MBX_SOURCE_TOO_LARGE,
                   "mbx_check: the script is %zu bytes; the source limit is %llu bytes (raise "
                   "MBX_LIMIT_SOURCE, or split the script)",
                   len, (unsigned long long)p->source);
    return MBX_SOURCE_TOO_LARGE;
  }
  /* The parser recurses in C: the same free stack as a run. */
  if (mbxV_cstack_free() < MBXV_CSTACK_NEEDED) {
    mbxU_error_set(err, MBX_STACK_TOO_SMALL,
                   "mbx_check: less than %zu KiB of C stack is left on this thread",
                   MBXV_CSTACK_NEEDED >> 10);
    return MBX_STACK_TOO_SMALL;
  }
  pthread_once(&c_locale_once, make_c_locale);
  if (c_locale == (locale_t)0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_check: could not create the C locale");
    return MBX_NO_MEMORY;
  }
  pthread_once(&builtins_once, list_builtins);
  if (!builtins_ok) {
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_check: out of host memory while listing the "
                   "standard library's globals");
    return MBX_NO_MEMORY;
  }
  check_state st = {.code = code ? code : "", .len = len};
  /* Number syntax must not follow the host's locale (as in mbx_run). */
  locale_t host_locale = uselocale(c_locale);
  mbx_status s = compile(p, &st, err);
  uselocale(host_locale);
  mbxU_buf out = {0};
  if (s == MBX_OK) {
    if (st.syntax)
      report_syntax(&st, &out);
    else
      s = report_globals(p, &st, &out, err);
  }
  clear_state(&st);
  if (s != MBX_OK) {
    mbxU_buf_free(&out);
    return s;
  }
  size_t n;
  char *text = mbxU_buf_take(&out, &n);
  if (text == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_check: out of host memory");
    return MBX_NO_MEMORY;
  }
  *json = text;
  if (json_len) *json_len = n;
  return MBX_OK;
}

mbx_status mbxH_check_dump(const mbx_policy *p, const char *code, size_t len, char **dump,
                           size_t *dump_len, mbx_error *err) {
  *dump = NULL;
  *dump_len = 0;
  if (len > p->source) {
    mbxU_error_set(err, MBX_SOURCE_TOO_LARGE, "the script is over the source limit");
    return MBX_SOURCE_TOO_LARGE;
  }
  if (mbxV_cstack_free() < MBXV_CSTACK_NEEDED) {
    mbxU_error_set(err, MBX_STACK_TOO_SMALL, "too little C stack to compile");
    return MBX_STACK_TOO_SMALL;
  }
  pthread_once(&c_locale_once, make_c_locale);
  if (c_locale == (locale_t)0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "could not create the C locale");
    return MBX_NO_MEMORY;
  }
  check_state st = {.code = code ? code : "", .len = len};
  locale_t host_locale = uselocale(c_locale);
  mbx_status s = compile(p, &st, err);
  uselocale(host_locale);
  if (s == MBX_OK && st.syntax) {
    mbxU_error_set(err, MBX_SYNTAX_ERROR, "%s", st.syntax);
    s = MBX_SYNTAX_ERROR;
  }
  if (s == MBX_OK) {
    *dump = mbxU_buf_take(&st.dump, dump_len);
    if (*dump == NULL) {
      mbxU_error_set(err, MBX_NO_MEMORY, "out of host memory");
      s = MBX_NO_MEMORY;
    }
  }
  clear_state(&st);
  return s;
}
