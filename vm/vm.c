/* vm/vm.c -- one sandbox's Lua state: creation, teardown and the panic recovery point. */
#include "vm/vm.h"

#include <stddef.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include <lauxlib.h>

#include "vm/arena.h"

const char mbxV_key_builtins = 0;
const char mbxV_key_run_thread = 0;

/* An error escaped every protected call: the state may be inconsistent. Never return into
   Lua (the default handler aborts the whole host): mark the run internal_error and unwind
   to the host call's own recovery point. The sandbox is poisoned and only freed. */
static int on_panic(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  atomic_store(&vm->budget.trip, MBXV_TRIP_INTERNAL);
  if (vm->panic_jmp) longjmp(*vm->panic_jmp, 1);
  return 0; /* unreachable in practice: every host entry sets panic_jmp */
}

/* The budget's limits and run state, field by field: the interrupt flag may be written by
   another thread at any moment (mbx_sandbox_interrupt), so the atomics are stored, never
   overwritten by a memset or a memcpy, once the sandbox is handed out. */
static void reset_budget(mbxV_budget *b, const mbxV_config *cfg) {
  b->instruction_limit = cfg->instruction_limit;
  b->instructions = 0;
  b->deadline_ns = 0;
  b->time_limit_ms = cfg->time_limit_ms;
  atomic_store(&b->interrupt, 0);
  atomic_store(&b->trip, MBXV_TRIP_NONE);
  b->running = 0;
  b->current = NULL;
  b->run_thread = NULL;
  b->exit_code = 0;
  b->no_hook = 0;
  b->uncounted = 0;
  b->switched = 0;
}

/* Everything that belongs to one sandbox rather than to its Lua state, except the budget and
   the output (see configure and reconfigure). The heap's blocks, `used` and `arena` are the
   state's; limits and counters are the sandbox's. */
static void configure_fields(mbxV_vm *vm, const mbxV_config *cfg) {
  vm->heap.limit = cfg->memory_limit;
  vm->heap.ceiling = mbxV_heap_ceiling_for(cfg->memory_limit);
  /* Freed pages may stay resident up to the limit (a template holds its builder's value). */
  if (vm->heap.arena) vm->heap.arena->free_allowance = cfg->memory_limit;
  vm->heap.peak = vm->heap.used;
  vm->heap.pressure_pending = 0;
  vm->heap.refused = 0;
  vm->heap.on_pressure = mbxV_budget_on_pressure;
  vm->heap.pressure_ud = vm;
  vm->source_limit = cfg->source_limit;
  vm->result_limit = cfg->result_limit ? cfg->result_limit : cfg->output_limit;
  vm->address_key = cfg->address_key;
  vm->panic_jmp = NULL;
  vm->paused = 0;
  vm->last_text_hash = 0;
  vm->run_thread = NULL;
  vm->memo_text = vm->memo_name = NULL;
  vm->memo_text_len = vm->memo_name_len = 0;
  vm->memo_ref = 0;
  vm->pending_set = 0;
  vm->shaped = 0;
  vm->fresh_source = NULL;
  vm->fresh_gen = 0;
  memset(vm->ext, 0, sizeof vm->ext);
}

/* A vm no one else knows yet: set on a fresh vm and after a template copy (which holds the
   values of the sandbox that built it, output buffers of no one included). */
static void configure(mbxV_vm *vm, const mbxV_config *cfg) {
  memset(&vm->budget, 0, sizeof vm->budget);
  reset_budget(&vm->budget, cfg);
  mbxV_output_init(&vm->output, cfg->output_limit); /* host memory: a template holds none */
  configure_fields(vm, cfg);
}

/* A live sandbox's vm going back to pristine: its budget and output buffers are its own
   (they were kept out of the copy), so they are reset in place rather than replaced. */
static void reconfigure(mbxV_vm *vm, const mbxV_config *cfg) {
  reset_budget(&vm->budget, cfg);
  mbxV_output_reset(&vm->output);
  vm->output.limit = cfg->output_limit;
  configure_fields(vm, cfg);
}

/* The part of the vm struct a restore must not overwrite: the budget (its interrupt flag is
   shared with other threads) and the output (its buffers are host memory the snapshot's
   pointers may no longer own). They are adjacent, so one hole covers both. */
_Static_assert(offsetof(mbxV_vm, output) >= offsetof(mbxV_vm, budget) + sizeof(mbxV_budget) &&
                   offsetof(mbxV_vm, output) <
                       offsetof(mbxV_vm, budget) + sizeof(mbxV_budget) + _Alignof(mbxV_output),
               "budget and output must be adjacent in mbxV_vm");

static size_t hole_at(const mbxV_vm *vm) {
  return (size_t)((const char *)&vm->budget - (const char *)vm->slot->arena);
}

static size_t hole_len(void) {
  return offsetof(mbxV_vm, output) + sizeof(mbxV_output) - offsetof(mbxV_vm, budget);
}

static void restore_keeping_sandbox(mbxV_vm *vm, const char *bytes, size_t len) {
  mbxV_slot_restore_prefix(vm->slot, bytes, len, hole_at(vm), hole_len());
}

/* The class's shared template, relocated into this slot (vm/arena.c). The vm struct came with
   it: its slot pointer is the builder's (host memory, not relocated) until set here. */
static void restore_shared(mbxV_slot *slot, const mbxV_shared *t, int keep_sandbox) {
  mbxV_vm *vm = (mbxV_vm *)slot->arena->user;
  if (keep_sandbox)
    mbxV_slot_restore_shared(slot, t, hole_at(vm), hole_len());
  else
    mbxV_slot_restore_shared(slot, t, 0, 0);
  vm = (mbxV_vm *)slot->arena->user;
  vm->slot = slot;
}

/* lua_newstate on vm's heap, with vm in the extra space and our panic handler. */
static int new_state(mbxV_vm *vm) {
  /* lua_newstate, not luaL_newstate: the latter installs a warn function that writes to the
     host's stderr once a script calls warn("@on") (THREATS D11). */
  lua_State *L = lua_newstate(mbxV_heap_alloc, &vm->heap);
  if (L == NULL) return 0;
  /* Threads created later copy the main thread's extra space, so every thread finds vm. */
  *(mbxV_vm **)lua_getextraspace(L) = vm;
  lua_atpanic(L, on_panic);
  vm->L = L;
  return 1;
}

int mbxV_vm_open(mbxV_vm *vm, const mbxV_config *cfg) {
  memset(vm, 0, sizeof *vm);
  mbxV_heap_init(&vm->heap, cfg->memory_limit);
  configure(vm, cfg);
  if (!new_state(vm)) {
    mbxV_heap_release_all(&vm->heap);
    return 0;
  }
  return 1;
}

void mbxV_vm_close(mbxV_vm *vm) {
  mbxV_heap_release_all(&vm->heap);
  mbxV_output_free(&vm->output);
  vm->L = NULL;
}

/* Open the libraries on a fresh state in vm's heap and collect the garbage of opening. On
   failure vm->L is NULL and the heap is released. */
static mbxV_new_result populate(mbxV_vm *vm, lua_CFunction open_libs) {
  if (!new_state(vm)) {
    mbxV_heap_release_all(&vm->heap);
    return MBXV_NEW_NO_FIT;
  }
  lua_pushcfunction(vm->L, open_libs);
  if (lua_pcall(vm->L, 0, 0, 0) != LUA_OK) {
    mbxV_heap_release_all(&vm->heap);
    vm->L = NULL;
    return MBXV_NEW_NO_FIT;
  }
  /* Collect the garbage of opening now, once, rather than in every sandbox's first run. */
  lua_gc(vm->L, LUA_GCCOLLECT);
  vm->heap.peak = vm->heap.used;
  return MBXV_NEW_OK;
}

/* The slot's first sandbox (or every sandbox without templates): build the pristine state in
   place. No port: nothing the template keeps may depend on one sandbox's policy. */
static mbxV_new_result build(mbxV_slot *slot, const mbxV_config *cfg, lua_CFunction open_libs) {
  mbxV_arena *a = mbxV_arena_init(slot->arena, slot->size, sizeof(mbxV_vm));
  mbxV_vm *vm = (mbxV_vm *)a->user;
  mbxV_heap_init(&vm->heap, cfg->memory_limit);
#ifndef MBX_ARENA_MALLOC
  vm->heap.arena = a;
#endif
  vm->slot = slot;
  configure(vm, cfg);
#ifndef MBX_ARENA_MALLOC
  a->zero_fill = 1; /* a template: only what Lua writes (mbxV_slot_share) */
#endif
  mbxV_new_result r = populate(vm, open_libs);
  if (r != MBXV_NEW_OK) a->zero_fill = 0;
  return r;
}

/* The slot holds a shaped template for cfg's shape, and cfg's memory limit held what its
   install needed (so the install would have run the same way under this limit). */
static int shape_fits(const mbxV_slot *slot, const mbxV_config *cfg) {
  return cfg->shape_key && slot->shape_bytes && slot->shape_key_len == cfg->shape_key_len &&
         slot->shape_peak <= cfg->memory_limit &&
         memcmp(slot->shape_key, cfg->shape_key, cfg->shape_key_len) == 0;
}

/* After a restore from the shaped template and the configuration: the peak is the one the
   install reached, as if it had just run. */
static void mark_shaped(mbxV_vm *vm, size_t peak) {
  vm->heap.peak = peak;
  vm->shaped = 1;
  mbxV_pool_count_shape(vm->slot->pool, 1);
}

/* The pristine state for cfg back in the slot: the shaped template for cfg's shape when one
   fits (returns 1, *peak its install's), else the plain one; the slot's own templates, or the
   class's shared ones relocated. keep_sandbox: a reset (the budget and output stay). *source
   and *gen: what a first run may replay a recording of (vm/first_run.h); NULL for the slot's
   own templates. */
static int restore_pristine(mbxV_slot *slot, const mbxV_config *cfg, const mbxV_shared *shared,
                            int keep_sandbox, size_t *peak, const char **source, uint64_t *gen) {
  mbxV_vm *vm = (mbxV_vm *)slot->arena->user;
  *peak = 0;
  *source = NULL;
  *gen = 0;
  if (slot->template_bytes) {
    int shaped = shape_fits(slot, cfg);
    const char *bytes = shaped ? slot->shape_bytes : slot->template_bytes;
    size_t len = shaped ? slot->shape_len : slot->template_len;
    if (keep_sandbox)
      restore_keeping_sandbox(vm, bytes, len);
    else
      mbxV_slot_restore_bytes(slot, bytes, len);
    *peak = slot->shape_peak;
    return shaped;
  }
  mbxV_shape *sh = mbxV_pool_shape_get(slot, cfg->shape_key, cfg->shape_key_len, cfg->memory_limit);
  restore_shared(slot, sh ? &sh->t : shared, keep_sandbox);
  if (sh == NULL) {
    *source = mbxV_slot_plain_source(slot, shared);
    return 0;
  }
  *peak = sh->peak;
  /* Named while the reference holds sh: its generation tells it from a later shape that
     gets the same address once this one is freed. */
  *source = mbxV_slot_shape_source(slot, sh, gen);
  mbxV_pool_shape_put(slot->pool, sh);
  return 1;
}

void mbxV_vm_shape_install(mbxV_vm *vm, const mbxV_config *cfg, int starting) {
#ifdef MBX_ARENA_MALLOC
  (void)vm;
  (void)cfg;
  (void)starting;
#else
  mbxV_slot *slot = vm->slot;
  if (slot == NULL) return;
  /* Only a state that may become the class's shaped template pays for the zeroing. */
  slot->arena->zero_fill =
      starting && cfg->shape_key && slot->template_bytes == NULL && mbxV_slot_shared(slot) != NULL;
#endif
}

int mbxV_vm_shape_save(mbxV_vm *vm, const mbxV_config *cfg) {
#ifdef MBX_ARENA_MALLOC
  (void)vm;
  (void)cfg;
  return 0;
#else
  mbxV_slot *slot = vm->slot;
  if (slot == NULL) return 0;
  int installed_clean = slot->arena->zero_fill; /* mbxV_vm_shape_install */
  slot->arena->zero_fill = 0;
  if (cfg->shape_key == NULL || cfg->shape_key_len > MBXV_SHAPE_KEY_MAX) return 0;
  const mbxV_shared *shared = mbxV_slot_shared(slot);
  size_t plain = slot->template_bytes ? slot->template_len : shared ? shared->len : 0;
  if (plain == 0) return 0;
  size_t len = mbxV_arena_prefix(slot->arena);
  if (len < plain || len - plain > MBXV_SHAPE_EXTRA_MAX) return 0;
  if (slot->template_bytes == NULL) {
    /* The class's shaped template, relocatable like the plain one. */
    if (!installed_clean || !mbxV_slot_share_shape(slot, cfg->shape_key, cfg->shape_key_len,
                                                   vm->heap.peak, hole_at(vm), hole_len()))
      return 0;
    mbxV_pool_count_shape(slot->pool, 0);
    return 1;
  }
  char *bytes = mbxV_copy_alloc(len);
  char *key = malloc(cfg->shape_key_len ? cfg->shape_key_len : 1);
  if (bytes == NULL || key == NULL) {
    free(bytes);
    free(key);
    return 0;
  }
  mbxV_arena_copy_out(slot->arena, bytes, len);
  memcpy(key, cfg->shape_key, cfg->shape_key_len);
  mbxV_slot_drop_shape(slot);
  slot->shape_bytes = bytes;
  slot->shape_len = len;
  slot->shape_key = key;
  slot->shape_key_len = cfg->shape_key_len;
  slot->shape_peak = vm->heap.peak;
  mbxV_pool_count_shape(slot->pool, 0);
  return 1;
#endif
}

mbxV_new_result mbxV_vm_new(struct mbxV_pool *pool, const mbxV_config *cfg, lua_CFunction open_libs,
                            mbxV_vm **out) {
  *out = NULL;
  mbxV_slot *slot;
  switch (mbxV_pool_take(pool, cfg->memory_limit, &slot)) {
  case MBXV_TAKE_OK:
    break;
  case MBXV_TAKE_CAP:
    return MBXV_NEW_CAP;
  case MBXV_TAKE_RESERVE_CAP:
    return MBXV_NEW_RESERVE_CAP;
  default:
    return MBXV_NEW_NO_SPACE;
  }
  mbxV_vm *vm = (mbxV_vm *)slot->arena->user;
  const mbxV_shared *shared = mbxV_slot_shared(slot);
  if (slot->template_bytes || shared) {
    /* The pristine state, its allocator and this vm struct, byte for byte, at the addresses
       they were built at (every pointer in them is valid again), or the class's shared
       template relocated to this slot. */
    size_t peak;
    const char *source;
    uint64_t gen;
    int shaped = restore_pristine(slot, cfg, shared, 0, &peak, &source, &gen);
    vm = (mbxV_vm *)slot->arena->user;
    if (vm->heap.used > cfg->memory_limit) {
      mbxV_pool_give(slot);
      return MBXV_NEW_NO_FIT;
    }
    configure(vm, cfg);
    if (shaped) mark_shaped(vm, peak);
    vm->fresh_source = source;
    vm->fresh_gen = gen;
  } else {
    mbxV_new_result r = build(slot, cfg, open_libs);
    if (r != MBXV_NEW_OK) {
      mbxV_pool_give(slot);
      return r;
    }
    vm = (mbxV_vm *)slot->arena->user;
#ifndef MBX_ARENA_MALLOC
    /* The class's shared template when this slot can hold one; else the slot's own. Out of
       host memory here only costs the next sandbox in this slot a rebuild. */
    if (!mbxV_slot_share(slot, hole_at(vm), hole_len())) mbxV_slot_snapshot(slot);
#endif
  }
  *out = vm;
  return MBXV_NEW_OK;
}

mbxV_new_result mbxV_vm_reset(mbxV_vm *vm, const mbxV_config *cfg, lua_CFunction open_libs) {
  mbxV_slot *slot = vm->slot;
  const mbxV_shared *shared = mbxV_slot_shared(slot);
  if (slot->template_bytes || shared) {
    size_t peak;
    const char *source; /* a reset's state replays nothing (vm/vm.h) */
    uint64_t gen;
    int shaped = restore_pristine(slot, cfg, shared, 1, &peak, &source, &gen);
    reconfigure(vm, cfg);
    if (shaped) mark_shaped(vm, peak);
    return MBXV_NEW_OK;
  }
  /* No template (MBX_ARENA_MALLOC builds, or a snapshot that found no host memory): build
     the state again in place. The vm struct is not re-zeroed: its budget and output stay. */
  mbxV_heap_release_all(&vm->heap); /* frees the blocks only in MBX_ARENA_MALLOC builds */
  vm->L = NULL;
  mbxV_arena_clear(slot->arena, sizeof(mbxV_vm));
  mbxV_heap_init(&vm->heap, cfg->memory_limit);
#ifndef MBX_ARENA_MALLOC
  vm->heap.arena = slot->arena;
#endif
  reconfigure(vm, cfg);
  mbxV_new_result r = populate(vm, open_libs);
#ifndef MBX_ARENA_MALLOC
  if (r == MBXV_NEW_OK) mbxV_slot_snapshot(slot);
#endif
  return r;
}

mbxV_checkpoint_result mbxV_vm_checkpoint(mbxV_vm *vm, mbxV_checkpoint *ck) {
#ifdef MBX_ARENA_MALLOC
  (void)vm;
  (void)ck;
  return MBXV_CHECKPOINT_UNSUPPORTED; /* the state is spread over malloc blocks */
#else
  /* A rewind to this copy is no fresh sandbox: it never replays a first run (first_run.h). */
  vm->fresh_source = NULL;
  vm->fresh_gen = 0;
  /* Header, vm struct and every block: the used prefix is the whole state (vm/arena.h). */
  size_t len = mbxV_arena_prefix(vm->slot->arena);
  if (len > ck->cap) {
    /* Page-aligned like the templates (mbxV_copy_alloc); the old bytes are overwritten
       whole, so they are not moved. */
    char *grown = mbxV_copy_alloc(len);
    if (grown == NULL) return MBXV_CHECKPOINT_NO_MEMORY; /* the old checkpoint stays */
    free(ck->bytes);
    ck->bytes = grown;
    ck->cap = len;
  }
  mbxV_arena_copy_out(vm->slot->arena, ck->bytes, len);
  ck->len = len;
  return MBXV_CHECKPOINT_OK;
#endif
}

void mbxV_vm_rewind(mbxV_vm *vm, const mbxV_checkpoint *ck) {
  if (ck->len == 0) return;
  restore_keeping_sandbox(vm, ck->bytes, ck->len);
  mbxV_output_reset(&vm->output);
}

void mbxV_checkpoint_free(mbxV_checkpoint *ck) {
  free(ck->bytes);
  ck->bytes = NULL;
  ck->len = ck->cap = 0;
}

void mbxV_vm_free(mbxV_vm *vm) {
  if (vm == NULL) return;
  mbxV_output_free(&vm->output);
  mbxV_heap_release_all(&vm->heap); /* frees the blocks only in MBX_ARENA_MALLOC builds */
  vm->L = NULL;
  mbxV_pool_give(vm->slot);
}

int mbxV_record_builtins(lua_State *L) {
  /* Sized before it is filled: a table grown key by key leaves its smaller parts behind as
     garbage, holes in the template every sandbox copies. */
  int n = 0;
  lua_pushglobaltable(L);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    n++;
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, n);
  lua_pushglobaltable(L);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushboolean(L, 1);
    lua_rawset(L, -5);
  }
  lua_pop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mbxV_key_builtins);
  return 0;
}

void mbxV_vm_interrupt(mbxV_vm *vm) {
  atomic_store_explicit(&vm->budget.interrupt, 1, memory_order_release);
}

int mbxV_vm_paused(const mbxV_vm *vm) {
  return vm && vm->L ? vm->paused : 0;
}

size_t mbxV_vm_heap_used(const mbxV_vm *vm) {
  return vm && vm->L ? vm->heap.used : 0;
}

void mbxV_vm_touched(mbxV_vm *vm) {
  vm->fresh_source = NULL;
  vm->fresh_gen = 0;
}

size_t mbxV_vm_hole(const mbxV_vm *vm, size_t *len) {
  *len = hole_len();
  return hole_at(vm);
}

void mbxV_vm_set_host_call_limit(mbxV_vm *vm, uint64_t limit) {
  vm->budget.host_call_limit = limit;
}
