/* vm/cstack.c -- the C stack guard (see vm/cstack.h for why it exists). */
#include "vm/cstack.h"

#include <pthread.h>

#include <lauxlib.h>

#include "vm/vm.h"

/* The calling thread's stack, [low, high), or zeros when pthread cannot say. Queried once per
   thread: pthread_getattr_np costs microseconds to milliseconds (it reads /proc for the main
   thread). */
typedef struct thread_stack {
  uintptr_t low, high;
  int known;
} thread_stack;

static const thread_stack *this_thread_stack(void) {
  static _Thread_local thread_stack ts;
  if (!ts.known) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void *addr;
      size_t size;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        ts.low = (uintptr_t)addr;
        ts.high = ts.low + size;
      }
      pthread_attr_destroy(&attr);
    }
    ts.known = 1;
  }
  return &ts;
}

/* The frame address, not the address of a local: ASan's fake stacks (detect_stack_use_after_
   return) move locals to the heap, but the frame itself stays on the real stack. Never
   inlined, so the address is a frame at least as deep as the caller's. */
__attribute__((noinline)) static uintptr_t here(void) {
  return (uintptr_t)__builtin_frame_address(0);
}

size_t mbxV_cstack_free(void) {
  const thread_stack *ts = this_thread_stack();
  uintptr_t sp = here();
  if (ts->low == 0 || sp < ts->low || sp >= ts->high) return SIZE_MAX;
  return sp - ts->low;
}

void mbxV_cstack_arm(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  uintptr_t sp = here();
  uintptr_t floor = sp > MBXV_CSTACK_DEPTH ? sp - MBXV_CSTACK_DEPTH : 0;
  const thread_stack *ts = this_thread_stack();
  if (ts->low != 0 && sp >= ts->low && sp < ts->high) {
    uintptr_t limit = ts->low + MBXV_CSTACK_RESERVE;
    if (floor < limit) floor = limit;
  }
  vm->budget.cstack_floor = floor;
}

int mbxV_cstack_low(lua_State *L) {
  return here() < mbxV_from(L)->budget.cstack_floor;
}

void mbxV_cstack_check(lua_State *L) {
  if (here() < mbxV_from(L)->budget.cstack_floor) luaL_error(L, "C stack overflow");
}
