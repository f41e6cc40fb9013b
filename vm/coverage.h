/* vm/coverage.h -- guest line coverage for the fuzz engine: edges between executed lines. */
#ifndef MBX_VM_COVERAGE_H
#define MBX_VM_COVERAGE_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

/*
** moonbox-fuzz (host/fuzz/main.c) hands libFuzzer a map of 8-bit counters; the budget's hook
** (vm/budget.c) adds a line event to its count hook while a map is set, and every line event
** bumps the counter of the edge (previous line -> this line). A line is (chunk name, line
** number): the chunk name as Lua shortens it, so an edge has the same counter in every process
** (libFuzzer's -fork and -merge children compare features across processes). A line of the
** same chunk reached from another coroutine is an edge like any other: the previous line is
** the map's, not the thread's.
**
** The map is process-wide, like libFuzzer's own counters: only the fuzz engine sets it, and it
** runs one sandbox on one thread. Outside it the hooks never look at a line (one load of a NULL
** pointer each time a hook is armed).
*/
typedef struct mbxV_coverage {
  uint8_t *counters; /* libFuzzer's extra counters */
  size_t mask;       /* number of counters - 1 (a power of two) */
  uint32_t prev;     /* the previous line's location, shifted (A->B differs from B->A) */
} mbxV_coverage;

/* The map line events go to; NULL (the default) means no line events are asked for. */
extern mbxV_coverage *mbxV_coverage_active;

/* Set (or with NULL, clear) the map. Threads armed before keep their mask until re-armed; a
   line event that finds no map does nothing. Call it between runs. */
void mbxV_coverage_set(mbxV_coverage *cov);
/* Forget the previous line: every input's first edge starts from the same place. */
void mbxV_coverage_restart(void);
/* The line hook's work, called by vm/budget.c's hook on LUA_HOOKLINE. */
void mbxV_coverage_line(lua_State *L, lua_Debug *ar);

/*
** Comparison hints: the fuzz engine sets this to a function that passes them on to libFuzzer
** (__sanitizer_weak_hook_memcmp); the metered string functions (string.find, string.match)
** call it, after their metered search failed, with the subject from the start offset and the
** literal they looked for (a plain pattern, or the literal head of a pattern). NULL outside
** the fuzz engine, so the cost there is one branch. The function must copy at most a bounded
** prefix of each (the engine takes 64 bytes, libFuzzer's longest compare word).
*/
typedef void (*mbxV_compare_hint_fn)(const char *subject, size_t subject_len, const char *wanted,
                                     size_t wanted_len);
extern mbxV_compare_hint_fn mbxV_compare_hint;

#endif
