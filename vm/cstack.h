/* vm/cstack.h -- the C stack guard: a floor under which no guest re-entry into Lua may go. */
#ifndef MBX_VM_CSTACK_H
#define MBX_VM_CSTACK_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

/* Lua bounds C recursion by a per-thread counter (LUAI_MAXCCALLS, 200), not by bytes, and
   5.4.4 restarts that counter where a coroutine is closed (lua_resetthread runs __close with
   the closed thread's own stale count). A chain of closes, each nesting C calls that re-enter
   Lua, therefore has no bound in Lua itself and overflows any C stack (issue 9, A.1).
   moonbox bounds the real depth instead: mbxV_cstack_arm records a floor when a run or
   resume starts, and every place where moonbox C code re-enters Lua (or the counter restarts)
   calls mbxV_cstack_check, which refuses with "C stack overflow" below the floor.

   Between two checks only Lua's own re-entries run (metamethods called by the VM, the
   parser, error handlers), and the counter bounds those to one 200-level nesting (220 while
   handling an error). MBXV_CSTACK_RESERVE, the room kept under the floor, covers the worst
   such nesting measured (70 KiB: 200 nested __lt; docs/SECURITY-MODEL.md, "C stack") more
   than three times over. Sanitizer builds have larger frames in moonbox's own code and keep
   twice the reserve. MBXV_CSTACK_DEPTH is what the guest may use above the floor: enough
   for Lua's own 200 levels of the hungriest moonbox path (gsub callbacks, 420 KiB), so Lua's
   bound normally fires first and the guard only where Lua's count restarts. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MBXV_CSTACK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MBXV_CSTACK_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define MBXV_CSTACK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MBXV_CSTACK_TSAN 1
#endif
#endif

#ifdef MBXV_CSTACK_SANITIZED
#define MBXV_CSTACK_RESERVE ((size_t)512 << 10)
#define MBXV_CSTACK_DEPTH ((size_t)1 << 20)
#else
#define MBXV_CSTACK_RESERVE ((size_t)256 << 10)
#define MBXV_CSTACK_DEPTH ((size_t)640 << 10)
#endif
/* mbx_run needs this much free stack below its frame: the guest's depth plus the reserve. */
#define MBXV_CSTACK_NEEDED (MBXV_CSTACK_DEPTH + MBXV_CSTACK_RESERVE)
/* The smallest thread stack the docs allow (include/moonbox.h): what mbx_run needs, plus
   128 KiB for what glibc keeps at the top of a thread's stack (its descriptor, static TLS)
   and for the host's own frames above mbx_run. ThreadSanitizer's runtime keeps far more
   there (its per-thread state is static TLS): 1 MiB. */
#ifdef MBXV_CSTACK_TSAN
#define MBXV_CSTACK_THREAD_MIN (MBXV_CSTACK_NEEDED + ((size_t)1 << 20))
#else
#define MBXV_CSTACK_THREAD_MIN (MBXV_CSTACK_NEEDED + ((size_t)128 << 10))
#endif

/* Bytes of C stack free below the caller's frame on this thread, from the thread's stack
   bounds (read once per thread). SIZE_MAX when the bounds are unknown or the caller is not on
   the thread's own stack (a host that switched stacks): the caller cannot tell. */
size_t mbxV_cstack_free(void);

/* Set the floor for a run or resume entered from the caller's frame: MBXV_CSTACK_DEPTH below
   it, and never closer than MBXV_CSTACK_RESERVE to the thread's stack limit when that is
   known. The depth bound alone holds for hosts that run sandboxes on stacks of their own. */
void mbxV_cstack_arm(lua_State *L);

/* 1 when the caller is below the floor of L's sandbox (nothing may re-enter Lua from here). */
int mbxV_cstack_low(lua_State *L);

/* Raise "C stack overflow" when the caller is below the floor; otherwise return. Call it from
   a C function Lua called, before re-entering Lua. */
void mbxV_cstack_check(lua_State *L);

#endif
