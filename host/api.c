/* host/api.c -- the public C API: runtime, policy, sandbox, run, interrupt. */
#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <lua.h>

#include "capabilities/policy.h"
#include "capabilities/port.h"
#include "host/result.h"
#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "vm/arena.h"
#include "vm/errors.h"
#include "vm/run.h"
#include "vm/vm.h"

/* mbx_run refuses to start with less C stack than this: Lua recurses in C up to 200 levels,
   and the most stack-hungry nesting measured needs more than 256 KiB (THREATS section 1). */
#define MBXH_MIN_STACK ((size_t)1 << 20)

struct mbx_runtime {
  locale_t c_locale;      /* runs switch the calling thread to it with uselocale */
  uint64_t address_key;   /* seeds the hashes that stand in for addresses */
  _Atomic uint64_t sandboxes_created;
  mbxV_pool *slots;       /* sandboxes' heap slots, reused by every thread (vm/arena.h) */
};

struct mbx_sandbox {
  mbx_runtime *rt;
  mbxV_vm *vm;            /* lives at a fixed address inside its slot */
  mbxC_port_local port; /* the policy's clock, seed and environment, copied; vm.port -> it */
  int poisoned;
  mbx_status poisoned_by;
  _Atomic int busy;
};

MBX_API const char *mbx_version(void) {
  return MBX_VERSION;
}

MBX_API int mbx_version_number(void) {
  return MBX_VERSION_NUMBER;
}

MBX_API void mbx_free(void *p) {
  free(p);
}

/* ---- runtime ---- */

MBX_API mbx_runtime *mbx_runtime_new(mbx_error *err) {
  mbx_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) {
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: out of memory");
    return NULL;
  }
  rt->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  if (rt->c_locale == (locale_t)0) {
    free(rt);
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: cannot create the C locale");
    return NULL;
  }
  if (getrandom(&rt->address_key, sizeof rt->address_key, 0) != sizeof rt->address_key) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rt->address_key = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ (uintptr_t)rt;
  }
  rt->slots = mbxV_pool_new(MBXV_POOL_DEFAULT_CAP);
  if (rt->slots == NULL) {
    freelocale(rt->c_locale);
    free(rt);
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: out of memory");
    return NULL;
  }
  return rt;
}

MBX_API void mbx_runtime_free(mbx_runtime *rt) {
  if (rt == NULL) return;
  mbxV_pool_free(rt->slots);
  freelocale(rt->c_locale);
  free(rt);
}

/* ---- policy ---- */

MBX_API mbx_policy *mbx_policy_new(void) {
  mbx_policy *p = malloc(sizeof *p);
  if (p) mbxC_policy_defaults(p);
  return p;
}

MBX_API void mbx_policy_free(mbx_policy *p) {
  if (p == NULL) return;
  mbxC_policy_clear(p);
  free(p);
}

MBX_API mbx_status mbx_policy_set_env(mbx_policy *p, const char *name, const char *value,
                                      mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_env: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  switch (mbxC_policy_set_env(p, name, value, why, sizeof why)) {
  case 0:
    return MBX_OK;
  case MBXC_POLICY_NO_MEMORY:
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_policy_set_env: out of memory");
    return MBX_NO_MEMORY;
  default:
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
}

MBX_API mbx_status mbx_policy_set_time(mbx_policy *p, int64_t epoch_seconds, mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_time: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (mbxC_policy_set_time(p, epoch_seconds, why, sizeof why) != 0) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_seed(mbx_policy *p, uint64_t seed, mbx_error *err) {
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_seed: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbxC_policy_set_seed(p, seed);
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_limit_checked(mbx_policy *p, mbx_limit which, uint64_t value,
                                                mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_limit: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (mbxC_policy_set_limit(p, which, value, why, sizeof why) != 0) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value) {
  return mbx_policy_set_limit_checked(p, which, value, NULL);
}

MBX_API uint64_t mbx_policy_get_limit(const mbx_policy *p, mbx_limit which) {
  return p ? mbxC_policy_get_limit(p, which) : 0;
}

/* ---- sandbox ---- */

static int run_protected(lua_State *L, lua_CFunction fn) {
  lua_pushcfunction(L, fn);
  return lua_pcall(L, 0, 0, 0) == LUA_OK;
}

MBX_API mbx_sandbox *mbx_sandbox_new(mbx_runtime *rt, const mbx_policy *p, mbx_error *err) {
  if (rt == NULL || p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_new: the runtime and the policy "
                                              "must not be NULL");
    return NULL;
  }
  mbx_sandbox *sb = calloc(1, sizeof *sb);
  if (sb == NULL) {
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
    return NULL;
  }
  sb->rt = rt;
  mbxV_config cfg = {.memory_limit = (size_t)p->memory,
                     .instruction_limit = p->instructions,
                     .time_limit_ms = p->time_ms,
                     .output_limit = (size_t)p->output,
                     .source_limit = (size_t)p->source,
                     .address_key = rt->address_key ^ atomic_fetch_add(&rt->sandboxes_created, 1)};
  if (mbxC_port_local_init(&sb->port, p) != 0) {
    free(sb);
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
    return NULL;
  }
  /* A slot's template was built with no port (it holds nothing of one sandbox); math.random
     is seeded from this sandbox's port once the state is in place. */
  mbxV_new_result made = mbxV_vm_new(rt->slots, &cfg, mbxL_open_sandbox, &sb->vm);
  if (made == MBXV_NEW_OK) {
    sb->vm->port = &sb->port.port;
    if (run_protected(sb->vm->L, mbxL_reseed)) return sb;
    mbxV_vm_free(sb->vm);
  }
  mbxC_port_local_free(&sb->port);
  free(sb);
  if (made == MBXV_NEW_CAP)
    mbxV_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: %u sandboxes are live in this runtime, its limit; free "
                   "some before creating more",
                   MBXV_POOL_DEFAULT_CAP);
  else if (made == MBXV_NEW_NO_SPACE)
    mbxV_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: cannot reserve %zu MiB of address space for the sandbox's "
                   "heap (8x MBX_LIMIT_MEMORY); lower the limit or free sandboxes",
                   mbxV_slot_size_for(cfg.memory_limit) >> 20);
  else
    mbxV_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: the standard library does not fit in the memory limit "
                   "(raise MBX_LIMIT_MEMORY)");
  return NULL;
}

MBX_API void mbx_sandbox_free(mbx_sandbox *sb) {
  if (sb == NULL) return;
  mbxV_vm_free(sb->vm);
  mbxC_port_local_free(&sb->port);
  free(sb);
}

MBX_API mbx_status mbx_sandbox_interrupt(mbx_sandbox *sb) {
  if (sb == NULL) return MBX_INVALID_ARGUMENT;
  atomic_store_explicit(&sb->vm->budget.interrupt, 1, memory_order_release);
  return MBX_OK;
}

MBX_API int mbx_sandbox_poisoned(const mbx_sandbox *sb) {
  return sb ? sb->poisoned : 0;
}

/* Free C stack below the current frame, from the thread's stack bounds (queried once per
   thread: pthread_getattr_np costs microseconds to milliseconds). */
static size_t stack_left(void) {
  static _Thread_local uintptr_t low;
  static _Thread_local int known;
  if (!known) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void *addr;
      size_t size;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) low = (uintptr_t)addr;
      pthread_attr_destroy(&attr);
    }
    known = 1;
  }
  char here;
  uintptr_t sp = (uintptr_t)&here;
  if (low == 0 || sp < low) return SIZE_MAX; /* unknown: do not refuse */
  return sp - low;
}

static int poisons(mbx_status s) {
  return s != MBX_OK && s != MBX_SYNTAX_ERROR && s != MBX_RUNTIME_ERROR && s != MBX_PAUSED;
}

MBX_API mbx_status mbx_run_named(mbx_sandbox *sb, const char *code, size_t code_len,
                                 const char *chunk_name, const char *inputs_json,
                                 size_t inputs_len, mbx_result **out, mbx_error *err) {
  if (out) *out = NULL;
  if (sb == NULL || out == NULL || (code == NULL && code_len > 0) ||
      (inputs_json == NULL && inputs_len > 0)) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_run: the sandbox and out must not be NULL, nor code/inputs with a length");
    return MBX_INVALID_ARGUMENT;
  }
  /* busy first: only the thread that owns the run may read what the run writes. */
  if (atomic_exchange(&sb->busy, 1)) {
    mbxV_error_set(err, MBX_SANDBOX_BUSY, "mbx_run: the sandbox is already running on "
                                          "another thread");
    return MBX_SANDBOX_BUSY;
  }
  if (sb->poisoned) {
    atomic_store(&sb->busy, 0);
    mbxV_error_set(err, MBX_SANDBOX_POISONED,
                   "this sandbox ended a run with %s and refuses further runs; free it and "
                   "create a new one",
                   mbx_status_key(sb->poisoned_by));
    return MBX_SANDBOX_POISONED;
  }
  if (stack_left() < MBXH_MIN_STACK) {
    atomic_store(&sb->busy, 0);
    mbxV_error_set(err, MBX_STACK_TOO_SMALL,
                   "mbx_run: less than 1 MiB of C stack is left on this thread; run sandboxes "
                   "on a thread with a larger stack (e.g. 8 MiB)");
    return MBX_STACK_TOO_SMALL;
  }
  /* The C locale for the run: a host setlocale would change number formatting and string
     comparison, and strcoll over-reads in 5.4.4 (THREATS section 5, f623b969). */
  locale_t host_locale = uselocale(sb->rt->c_locale);
  /* Lua keeps LUA_IDSIZE - 1 bytes of a chunk name; keep the end of a long one, where the
     file name is ("...dir/script.lua"). */
  char name[LUA_IDSIZE];
  const char *given = chunk_name && *chunk_name ? chunk_name : "input";
  size_t given_len = strlen(given), room = sizeof name - 2;
  if (given_len > room) snprintf(name, sizeof name, "=...%s", given + given_len - (room - 3));
  else snprintf(name, sizeof name, "=%s", given);
  mbxV_outcome outcome;
  mbxC_port_local_run_begin(&sb->port);
  const char *code_text = code ? code : "";
  mbx_status s = mbxV_run(sb->vm, code_text, code_len, name, inputs_json, inputs_len,
                          &outcome, err);
  uselocale(host_locale);
  if (s < MBX_API_ERROR_BASE) {
    if (poisons(s)) {
      sb->poisoned = 1;
      sb->poisoned_by = s;
    }
    *out = mbxH_result_new(&outcome, &sb->vm->output);
    if (*out == NULL) {
      mbxV_error_set(err, MBX_NO_MEMORY, "mbx_run: out of host memory for the result");
      s = MBX_NO_MEMORY;
    }
  }
  atomic_store(&sb->busy, 0);
  return s;
}

MBX_API mbx_status mbx_run(mbx_sandbox *sb, const char *code, size_t code_len,
                           const char *inputs_json, size_t inputs_len, mbx_result **out,
                           mbx_error *err) {
  return mbx_run_named(sb, code, code_len, "input", inputs_json, inputs_len, out, err);
}
