/* vm/vm.h -- one sandbox's Lua state: its heap, budget, output and the recovery point. */
#ifndef MBX_VM_VM_H
#define MBX_VM_VM_H

/*
** vm/ owns the guest VM and nothing outside it: the arena slots and their pristine templates,
** the guest heap and its limits, the one meter (budget.h: instructions, deadline, interrupt,
** memory and output, sticky trips), text-only loading and the bytecode cache, a run and its
** resume, error reports and tracebacks, and the Lua<->JSON codec. It knows no port, no policy
** and no stdlib state: what the layer above keeps per sandbox lives in `ext`, opaque here, and
** a run's outcome is reported in vm/status.h's terms for host/ to map.
*/

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "vm/budget.h"
#include "vm/heap.h"
#include "vm/output.h"

/* Size of the opaque extension area inside every vm (see mbxV_vm.ext). */
#define MBXV_EXT_BYTES 32

typedef struct mbxV_vm {
  lua_State *L; /* main thread: never runs guest code itself */
  mbxV_heap heap;
  mbxV_budget budget;
  mbxV_output output;
  size_t source_limit; /* bytes of one chunk given by the host */
  size_t result_limit; /* bytes of the JSON text of a run's value */
  /* The runtime's bytecode cache for host-given module sources (registered modules,
     stdlib/package.c), set by the host before each run and resume; NULL: compile each time
     (deterministic mode: a hit would skip the parse's charge). Never used for guest text. */
  struct mbxV_bcache *module_cache;
  uint64_t address_key; /* key of the hash that stands in for addresses in tostring */
  jmp_buf *panic_jmp;   /* recovery point of the active host call, for lua_atpanic */
  /* vm/run.c's own: the last run or resume returned MBX_PAUSED (the run thread yielded with
     the pending call in the registry) and waits for mbxV_resume. Lives outside the
     budget/output hole, so a checkpoint taken while paused rewinds to the paused state. */
  int paused;
  /* vm/run.c's own: a hash of the last run's text, so its function is kept only when a text
     comes twice in a row (a fresh sandbox's one run pays nothing for the keeping). */
  uint64_t last_text_hash;
  /* vm/run.c's own: C pointers to what the registry anchors for it (the registry stays the
     anchor the collector sees; a registry lookup by light-userdata key was about 150
     instructions, five of them a small live run). They live in the slot with the state, so
     checkpoints and rewinds carry them with the registry they mirror, a template (which never
     ran) holds NULLs, and no table the guest can reach ever holds them. run_thread: the idle
     thread the last clean run left; memo_text/memo_name: the bytes of the kept chunk's text
     and name strings (memo_ref: where the registry keeps its function); pending_set: the
     registry holds a pending call (stdlib/hostcall.c). */
  lua_State *run_thread;
  const char *memo_text, *memo_name;
  size_t memo_text_len, memo_name_len;
  int memo_ref; /* the kept function's luaL_ref in the registry, 0 before the first */
  int pending_set;
  /* Set by mbxV_vm_new/reset: the state came from the slot's shaped template for
     cfg->shape_key, so what that shape installs is already there (mbxV_vm_shape_save). */
  int shaped;
  /* Set by mbxV_vm_new when the state is one of the class's shared templates just restored
     (the bytes it came from, vm/arena.h mbxV_slot_plain_source, or mbxV_slot_shape_source
     for a shaped one, with that shape's generation in fresh_gen; 0 for the plain template),
     cleared by the first run and by anything else that changes the state before it
     (mbxV_vm_touched): what lets the first run replay a recorded preparation
     (vm/first_run.h). */
  const char *fresh_source;
  uint64_t fresh_gen;
  /* Bytes the layer above owns (stdlib/: its port pointer, pause and close-nesting state;
     stdlib/stdlib.h). vm/ never reads them: it zeroes them when a state is made or reset,
     and they travel with the vm through templates, checkpoints and rewinds. */
  _Alignas(void *) unsigned char ext[MBXV_EXT_BYTES];
  /* The slot this vm lives in (vm/arena.h), NULL for one made by mbxV_vm_open. A slot's vm is
     restored from a byte copy: every field above that belongs to one sandbox rather than to
     the slot must be set again after the copy (configure() in vm/vm.c). */
  struct mbxV_slot *slot;
} mbxV_vm;

typedef struct mbxV_config {
  size_t memory_limit;
  uint64_t instruction_limit; /* 0 = none */
  uint64_t time_limit_ms;     /* 0 = none */
  size_t output_limit;
  size_t source_limit;
  size_t result_limit; /* 0 = output_limit */
  uint64_t address_key;
  /* The exact description of what the layer above installs into every state of this sandbox
     after a restore (the stdlib: its host functions' names and kinds), or NULL. Sandboxes
     whose descriptions are equal byte for byte may share a shaped template; it must cover
     everything that shapes the installed state, and nothing the state reads through the
     port at call time. The bytes must outlive the vm (they are read again by a reset). */
  const char *shape_key;
  size_t shape_key_len;
} mbxV_config;

/* Caps of the shaped-template cache: one shaped template per slot (a newer shape replaces
   the slot's last one), no more than MBXV_SHAPE_KEY_MAX bytes of description and no more
   than MBXV_SHAPE_EXTRA_MAX bytes of state past the plain template; past either cap the
   shape is simply not cached (the install runs after every restore, as without a cache). */
#define MBXV_SHAPE_KEY_MAX 4096
#define MBXV_SHAPE_EXTRA_MAX (64 * 1024)

/* The sandbox that owns L (any of its threads). NULL for a state that is not ours. */
static inline mbxV_vm *mbxV_from(lua_State *L) {
  return *(mbxV_vm **)lua_getextraspace(L);
}

/* Create the Lua state with our allocator and panic handler; no libraries are opened.
   Returns 0 when the state cannot be created. */
int mbxV_vm_open(mbxV_vm *vm, const mbxV_config *cfg);
/* Release everything at once without lua_close: no guest code runs at teardown. */
void mbxV_vm_close(mbxV_vm *vm);

/* Why mbxV_vm_new gave no vm. */
typedef enum mbxV_new_result {
  MBXV_NEW_OK = 0,
  MBXV_NEW_CAP,         /* the pool's cap on live slots is reached */
  MBXV_NEW_RESERVE_CAP, /* the slot would pass the pool's cap on reserved address space */
  MBXV_NEW_NO_SPACE,    /* no address space for the slot, or no host memory */
  MBXV_NEW_NO_FIT       /* the pristine state does not fit in the memory limit */
} mbxV_new_result;

struct mbxV_pool;
/* A pristine sandbox in a slot taken from pool: its size class's shared template copied in and
   relocated to the slot (vm/arena.c; a memcpy of the used prefix plus, in a slot that keeps no
   relocated copy, adding the base difference to the template's pointer words), or the slot's
   own template where slots are not congruent; or, on a class's (or such a slot's) first use, a
   state built there: lua_newstate with the arena allocator, open_libs (a lua_CFunction) under
   lua_pcall and a full collection, then kept as the class's (or the slot's) template. With MBX_ARENA_MALLOC the heap uses malloc per block
   (so ASan sees every Lua block) and the state is built every time. The vm lives inside the
   slot, at a fixed address; it is returned with vm->ext zeroed: the layer above attaches what
   it needs (the stdlib its port), then reseeds anything seeded at open. */
mbxV_new_result mbxV_vm_new(struct mbxV_pool *pool, const mbxV_config *cfg, lua_CFunction open_libs,
                            mbxV_vm **out);
/* Give the slot back to its pool (from any thread). Never lua_close (it would run guest
   finalizers with the hooks off): the output buffers are freed and the slot is reset. */
void mbxV_vm_free(mbxV_vm *vm);

/* Back to pristine in place (same slot, same address): the slot's template copied back (a
   memcpy, like mbxV_vm_new), or, without a template, the state built again. The vm's budget
   and output buffers are kept and reset; every other per-sandbox field is set from cfg and
   vm->ext is zeroed again (the caller attaches and reseeds, as after mbxV_vm_new). On failure
   (only without a template: out of host memory) vm->L is NULL and the vm may only be reset
   again or freed. */
mbxV_new_result mbxV_vm_reset(mbxV_vm *vm, const mbxV_config *cfg, lua_CFunction open_libs);

/* A slot's shaped template: when cfg->shape_key is set and vm->shaped is 0, the caller
   installs what that shape describes right after mbxV_vm_new/reset (with vm->ext attached,
   before anything that draws from the port or runs guest code) and then calls this to keep
   the state as the slot's shaped template for that key. The next mbxV_vm_new/reset of the
   slot with an equal key (and a memory limit that held the install's peak) restores it
   instead of the plain template and sets vm->shaped. What the snapshot holds of this sandbox
   (vm->ext, the configuration) is set again after every restore, as for the plain template.
   Keeps nothing (returns 0) without a plain template, past the caps above or out of host
   memory. */
int mbxV_vm_shape_save(mbxV_vm *vm, const mbxV_config *cfg);
/* Bracket that install: starting 1 right before it (a state that may become its class's
   shared shaped template is then built with zero_fill, like the plain template: vm/arena.c),
   0 when the install failed (mbxV_vm_shape_save ends the bracket itself). */
void mbxV_vm_shape_install(mbxV_vm *vm, const mbxV_config *cfg, int starting);

/* A copy of a vm's whole state between runs, for rewinding to it: the slot's used prefix
   (arena header, this vm struct, every block). Owned by the caller; zero-initialise it, reuse
   it (its buffer is kept for the next checkpoint), release it with mbxV_checkpoint_free. */
typedef struct mbxV_checkpoint {
  char *bytes;
  size_t len; /* 0: nothing captured */
  size_t cap;
} mbxV_checkpoint;

typedef enum mbxV_checkpoint_result {
  MBXV_CHECKPOINT_OK = 0,
  MBXV_CHECKPOINT_NO_MEMORY,  /* no host memory for the copy: the previous one is kept */
  MBXV_CHECKPOINT_UNSUPPORTED /* MBX_ARENA_MALLOC builds: the state is not one byte range */
} mbxV_checkpoint_result;

/* Capture vm's state into ck (replacing what ck held). Never while a run is active: the
   state would point into the C stack. */
mbxV_checkpoint_result mbxV_vm_checkpoint(mbxV_vm *vm, mbxV_checkpoint *ck);
/* Copy ck back: the state is byte for byte what it was at the checkpoint, including the heap
   counters and the random generator; the budget and output buffers are the sandbox's and are
   kept (output emptied). Pages dirtied past the restored prefix go back to the OS. ck must
   come from this vm. Nothing happens when ck is empty. */
void mbxV_vm_rewind(mbxV_vm *vm, const mbxV_checkpoint *ck);
void mbxV_checkpoint_free(mbxV_checkpoint *ck);

/* What the host may ask of or tell a vm, without reaching into its parts. */
/* Stop the active run at its next check (any thread, any time). */
void mbxV_vm_interrupt(mbxV_vm *vm);
/* The last run or resume paused at an external call (0 for a vm without a state). */
int mbxV_vm_paused(const mbxV_vm *vm);
/* Bytes the guest heap counts now (0 for a vm without a state). */
size_t mbxV_vm_heap_used(const mbxV_vm *vm);
/* MBX_LIMIT_HOST_CALLS for the runs to come (after every restore of the state). */
/* The state no longer is the pristine one mbxV_vm_new restored (the layer above installed
   something into it before the first run): no recorded first run may be replayed over it. */
void mbxV_vm_touched(mbxV_vm *vm);
/* Where the sandbox's own part of the vm struct (budget and output: what restores keep)
   lies, as an offset from the slot's base, and its length. */
size_t mbxV_vm_hole(const mbxV_vm *vm, size_t *len);
void mbxV_vm_set_host_call_limit(mbxV_vm *vm, uint64_t limit);

/* Registry keys (light userdata addresses) shared between vm/ and stdlib/. */
extern const char mbxV_key_builtins;   /* set of global names present before any guest code */
extern const char mbxV_key_run_thread; /* the thread of the active run */
extern const char mbxV_key_pending;    /* the paused call as JSON: {"args":[..],"function":".."} */

/* Record the names currently in _G as built-ins: inputs may not shadow them. Run once the
   standard library is open, inside a protected call. */
int mbxV_record_builtins(lua_State *L);

#endif
