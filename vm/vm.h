/* vm/vm.h -- one sandbox's Lua state: its heap, budget, output and the recovery point. */
#ifndef MBX_VM_VM_H
#define MBX_VM_VM_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "vm/budget.h"
#include "vm/heap.h"
#include "vm/output.h"

typedef struct mbxV_vm {
  lua_State *L;           /* main thread: never runs guest code itself */
  mbxV_heap heap;
  mbxV_budget budget;
  mbxV_output output;
  size_t source_limit;    /* bytes of one chunk given by the host */
  uint64_t address_key;   /* key of the hash that stands in for addresses in tostring */
  jmp_buf *panic_jmp;     /* recovery point of the active host call, for lua_atpanic */
  int close_nesting;      /* nested coroutine closes in progress (stdlib/coroutine.c) */
} mbxV_vm;

typedef struct mbxV_config {
  size_t memory_limit;
  uint64_t instruction_limit; /* 0 = none */
  uint64_t time_limit_ms;     /* 0 = none */
  size_t output_limit;
  size_t source_limit;
  uint64_t address_key;
} mbxV_config;

/* The sandbox that owns L (any of its threads). NULL for a state that is not ours. */
static inline mbxV_vm *mbxV_from(lua_State *L) {
  return *(mbxV_vm **)lua_getextraspace(L);
}

/* Create the Lua state with our allocator and panic handler; no libraries are opened.
   Returns 0 when the state cannot be created. */
int mbxV_vm_open(mbxV_vm *vm, const mbxV_config *cfg);
/* Release everything at once without lua_close: no guest code runs at teardown. */
void mbxV_vm_close(mbxV_vm *vm);

/* Registry keys (light userdata addresses) shared between vm/ and stdlib/. */
extern const char mbxV_key_builtins; /* set of global names present before any guest code */
extern const char mbxV_key_run_thread; /* the thread of the active run */

/* Record the names currently in _G as built-ins: inputs may not shadow them. Run once the
   standard library is open, inside a protected call. */
int mbxV_record_builtins(lua_State *L);

#endif
