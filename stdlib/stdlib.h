/* stdlib/stdlib.h -- what guest code sees: the curated, metered standard library. */
#ifndef MBX_STDLIB_STDLIB_H
#define MBX_STDLIB_STDLIB_H

/*
** stdlib/ owns everything guest code can name: the curated base/string/table/math/utf8/
** coroutine/os/io/json libraries, the metered replacements of every C function whose work
** memory does not bound, the policing of metatables, and the trampolines of host functions.
** It reaches outside the VM only through capabilities/port.h (the one header of
** capabilities/ it includes) and keeps its per-sandbox state in the vm's extension area
** (mbxL_state below), so vm/ knows nothing of ports, pauses or coroutine closes.
*/

#include <lua.h>

#include "capabilities/port.h"
#include "vm/vm.h"

/* The stdlib's per-sandbox state, inside the vm (mbxV_vm.ext): copied with templates,
   checkpoints and rewinds, so a checkpoint taken while paused rewinds to the paused state.
   Zeroed when a state is made or reset. */
typedef struct mbxL_state {
  /* What the guest may reach outside the VM; NULL = nothing at all (a template is built with
     no port: it holds nothing of one sandbox). */
  const mbxC_port *port;
  int close_nesting;      /* nested coroutine closes in progress (stdlib/coroutine.c) */
  int paused;             /* an external call's yield is on its way up to the run thread */
  int pause_chain_broken; /* some resumer between here and the run thread cannot yield */
} mbxL_state;

_Static_assert(sizeof(mbxL_state) <= MBXV_EXT_BYTES, "mbxL_state must fit in mbxV_vm.ext");

/* The state of L's sandbox (any of its threads); NULL for a state that is not ours. */
static inline mbxL_state *mbxL_state_of(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  return vm ? (mbxL_state *)(void *)vm->ext : NULL;
}

/* The port of L's sandbox, NULL when none is attached. */
static inline const mbxC_port *mbxL_port(lua_State *L) {
  mbxL_state *st = mbxL_state_of(L);
  return st ? st->port : NULL;
}

/* The mbxC_wait of a host-time port operation (capabilities/port.h): no deadline, and the
   run's interrupt flag to poll. */
mbxC_wait mbxL_host_wait(lua_State *L);

/* Attach port to a freshly made or reset state (the host does this before reseeding and
   installing host functions). */
void mbxL_attach(lua_State *L, const mbxC_port *port);
/* A run or resume begins: per-run state back to its start (no close in progress, the run
   thread itself can hand a pause to the host). */
void mbxL_run_begin(lua_State *L);

/* Depth of nested coroutine.close / wrap error paths we allow: 5.4.4 resets the C-call count
   in lua_resetthread, so a chain of __close handlers closing coroutines overflows the C stack
   (upstream 1e64c139; THREATS 0.1). */
#define MBXL_MAX_CLOSE_NESTING 100
/* Links one __index/__newindex lookup may follow (setmetatable refuses longer chains): Lua
   follows them all inside one VM instruction, where no hook fires (issue 9, B.2). */
#define MBXL_CHAIN_MAX 16
/* Bytes of source one guest `load` call may compile (the parser is unmetered C). */
#define MBXL_LOAD_MAX (1024 * 1024)
/* Bytes of one module file require, loadfile and dofile compile (real modules reach 90 KiB):
   the file's size is checked before it is read (docs/vocabulary.md, "module size"). */
#define MBXL_MODULE_MAX MBXC_MODULE_MAX

/* Open everything a sandbox sees into L's globals, install the wrappers, and record the
   built-in names. A lua_CFunction: run it with lua_pcall on a fresh state. */
int mbxL_open_sandbox(lua_State *L);

/* The openers, one per library (each a lua_CFunction that leaves nothing on the stack). */
int mbxL_open_base(lua_State *L);
int mbxL_open_string(lua_State *L);
int mbxL_open_table(lua_State *L);
int mbxL_open_math(lua_State *L);
/* Seed math.random again from the port, as mbxL_open_math did: for a state restored from a
   template, which was built without a port. A lua_CFunction: run it with lua_pcall. */
int mbxL_reseed(lua_State *L);
int mbxL_open_utf8(lua_State *L);
int mbxL_open_coroutine(lua_State *L);
/* io and the fs module (fs.list/stat/mkdir/exists/remove). */
int mbxL_open_io(lua_State *L);
int mbxL_open_os(lua_State *L);
/* proc.run (stdlib/proc.c), and os.execute through /bin/sh -c: served by the port's exec_run
   (the guest gets "not available" without it). */
int mbxL_open_proc(lua_State *L);
int mbxL_os_execute(lua_State *L);
/* /bin/sh -c cmd with stdin (in_len bytes) through the port, counted like proc.run (the run's
   deadline ends the run). 0 with *res, or -1 with *e. For io.popen. */
int mbxL_exec_shell(lua_State *L, const char *cmd, const char *in, size_t in_len,
                    mbxC_exec_result *res, mbxC_port_error *e);
/* Push os.execute's results for an exit code (or code -1 and signal): true or fail, "exit" or
   "signal", the number. Returns 3. */
int mbxL_push_exec_status(lua_State *L, int code, int signal);
/* os.remove, os.rename and os.tmpname: files of the sandbox's view (stdlib/io.c). */
int mbxL_os_remove(lua_State *L);
int mbxL_os_rename(lua_State *L);
int mbxL_os_tmpname(lua_State *L);
int mbxL_open_json(lua_State *L);
/* debug: the subset real libraries use, Lua levels and functions only (stdlib/debug.c);
   after base (it keeps base's getmetatable and setmetatable). */
int mbxL_open_debug(lua_State *L);
/* package, require, loadfile and dofile (stdlib/package.c): opened after the libraries, it
   pre-loads the stock ones and serves the other built-ins (json, fs) present when it is
   opened. */
int mbxL_open_package(lua_State *L);
/* require("fuzz"): the input provider of fuzz targets (stdlib/fuzz.c); after require. */
int mbxL_open_fuzz(lua_State *L);
/* Make require(name) find the table at idx as a built-in module, after package.path's files
   (fuzz, host function modules). */
void mbxL_require_add(lua_State *L, const char *name, size_t name_len, int idx);

/* Install the port's granted functions (stdlib/hostcall.c) into the globals: dotted names
   make module tables that require serves. For a state restored from a template (which holds
   none): a lua_CFunction, run it with lua_pcall once the port is attached. */
int mbxL_open_host_functions(lua_State *L);
/* The exact description of what mbxL_open_host_functions installs for grants g (their order,
   kinds and names), the key of a slot's shaped template (vm/vm.h): written to out when it
   fits in cap; returns its length either way (0 for no functions). */
size_t mbxL_host_functions_shape(const mbxC_grants *g, char *out, size_t cap);
/* The trampoline of a native function (stdlib/native.c): upvalue 1 its index in the port's
   grants, upvalue 2 its name. Installed by mbxL_open_host_functions. */
int mbxL_native_call(lua_State *L);
/* Room for "<name>(#<n>)", the path the codec names a bad argument by. */
#define MBXL_HOSTFN_PATH_MAX 160

/* Push the guest-visible text of the value at idx, like luaL_tolstring but with a keyed hash
   in place of any address (no heap addresses reach the guest: THREATS E10). Runs __tostring
   (guest code, under the budget) and honours __name. */
const char *mbxL_tolstring(lua_State *L, int idx, size_t *len);
/* What string.format's "%p" shows for the value at idx, written to buf: "0x" and the digits
   tostring shows after the type name; NULL for a value without an address (nil, booleans,
   numbers), which stock prints as "(null)". */
const char *mbxL_pointer_text(lua_State *L, int idx, char *buf, size_t size);

/* Install string.find/match/gmatch/gsub (stdlib/pattern.c) and string.rep/pack/unpack
   (stdlib/strbuild.c) into the string library table at lib. */
void mbxL_install_patterns(lua_State *L, int lib);
void mbxL_install_builders(lua_State *L, int lib);

/* What a full collection costs in instructions: one per 64 bytes Lua holds. Lua's own count
   of the bytes it holds, not the arena's resident pages: the pages a state touches depend on
   where its slot and blocks fall, which differs between processes, and in deterministic mode
   the instruction count must not (the determinism differential, tests/determinism). */
size_t mbxL_collect_cost(lua_State *L);

/* 1 if the guest heap can still grow by `need` bytes (plus 64 KiB of slack for the call's own
   work) before the allocator refuses; garbage counts in `used`, so one charged full
   collection gets a second look before answering 0. A refusal inside Lua would run an
   emergency collection at a moment the guest picked (THREATS P0 item 8): big results are
   refused before anything is allocated instead. */
int mbxL_heap_fits(lua_State *L, size_t need);

/* 1 when the value at idx is a light C function (a C function without upvalues): Lua hashes
   those by their code address, so none may reach a guest (issue 9, D). */
int mbxL_is_light_cfunction(lua_State *L, int idx);

/* Per-value cost of growing the Lua stack, for pre-checks like the one above. */
#define MBXL_STACK_SLOT_COST 48u

/* A function this policy does not grant, and the message its stub raises, e.g.
   {"execute", "os.execute is not available: this policy grants no exec"}. */
typedef struct mbxL_refusal {
  const char *name;
  const char *message;
} mbxL_refusal;
/* Set each named field of the table at idx to a stub raising its message (a model can act on
   it; "attempt to call a nil value" says nothing). list ends with a NULL name. */
void mbxL_add_refusals(lua_State *L, int idx, const mbxL_refusal *list);

/* Deterministic mode (stdlib/deterministic.c). The opener replaces `next` and `pairs` with
   wrappers that check the port at call time (stock behaviour when the mode is off) and makes
   the registry's object-number table; run it after mbxL_open_base. */
int mbxL_open_deterministic(lua_State *L);
/* 1 when L's sandbox runs in deterministic mode (its port says so), else 0. */
int mbxL_deterministic(lua_State *L);
/* The per-sandbox number of the collectable (or light) value at idx: given in first-seen
   order from a counter starting at 1, and kept while the object lives. Raises on out of
   memory; call it from a frame Lua owns. */
lua_Integer mbxL_object_number(lua_State *L, int idx);

#endif
