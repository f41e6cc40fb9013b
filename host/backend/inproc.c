/* host/backend/inproc.c -- the in-process backend: the sandbox's vm runs on the calling thread, its
   port is served from a copy of the policy (capabilities/port_local.c), wrapped by the
   record/replay layer for deterministic policies. */
#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "capabilities/policy.h"
#include "capabilities/port_local.h"
#include "capabilities/port_record.h"
#include "capabilities/replay.h"
#include "host/backend/backend.h"
#include "host/backend/shared.h"
#include "host/result.h"
#include "stdlib/stdlib.h"
#include "vm/arena.h"
#include "vm/bytecode_cache.h"
#include "vm/cstack.h"
#include "vm/hibernate.h"
#include "common/error.h"
#include "vm/run.h"
#include "vm/vm.h"

typedef struct inproc {
  const mbxH_services *svc; /* the runtime's (host/backend/backend.h) */
  mbxV_vm *vm;              /* lives at a fixed address inside its slot */
  mbxC_port_local port;     /* the policy's clock, seed, environment and functions, copied */
  /* Deterministic policies only: the record/replay layer over port (snapshots); the stdlib
     then talks to record.port instead of port.port. */
  mbxC_port_record record;
  int recording;
  mbxV_config cfg;          /* what the sandbox was made with, for reset */
  uint64_t host_call_limit; /* MBX_LIMIT_HOST_CALLS, for the budget after every restore */
  /* mbx_sandbox_checkpoint: the state's bytes, and the port's state that goes with them (the
     output buffers are per run: nothing of them is kept). */
  mbxV_checkpoint checkpoint;
  mbxH_port_mark checkpoint_port; /* where the port stood (seed draws, io.stdin, the log) */
  /* What the policy's host functions install (mbxL_host_functions_shape): the key of the
     slot's shaped template; NULL without host functions or past MBXV_SHAPE_KEY_MAX. */
  char *shape_key;
  /* The deadline signal's entry for this sandbox (vm/watchdog.h): host memory, outside the
     slot that templates and rewinds copy. Used when the runtime has a watchdog and the
     policy is not deterministic (instruction counts are part of a deterministic run). */
  mbxV_watch watch;
  /* While hibernated (vm/hibernate.h): the compressed state; vm then points into a slot
     without pages. What stays in host memory meanwhile is everything above: the port (its
     VFS memory files and journal, open files of a paused run, the seed stream), the record
     layer's log, the checkpoint's copy, the shape key and the watch. The watch may stay
     listed in the watchdog: the watchdog reads a watch's vm only while a run is active on
     it (vm/watchdog.c, scan), and a hibernated sandbox runs nothing; each run sets the
     watch's thread again, so a sandbox woken on another thread is signalled there. */
  mbxV_image image;
} inproc;

static int run_protected(lua_State *L, lua_CFunction fn) {
  lua_pushcfunction(L, fn);
  return lua_pcall(L, 0, 0, 0) == LUA_OK;
}

/* Give a freshly restored state (new or reset) what depends on the policy: a slot's
   template was built with no port, so math.random is seeded again and the host functions
   are installed here. Returns 0 when either step fails (guest heap too small). */
static int attach_port(inproc *ip) {
  mbxL_attach(ip->vm->L, ip->recording ? &ip->record.port : &ip->port.port);
  mbxV_vm_set_host_call_limit(ip->vm, ip->host_call_limit);
  /* The host functions first, before the seed draw: the state they leave is then the same
     for every sandbox of this shape, and is kept as the slot's shaped template (vm/vm.h) so
     the next sandbox of the shape restores it instead of installing them again. */
  /* Without host functions there is nothing to install (and no protected call to pay). */
  const mbxC_grants *grants = ip->port.port.grants;
  if (!ip->vm->shaped && grants && grants->fn_count > 0) {
    /* What the install adds is not in the plain template a first run may be recorded over
       (vm/first_run.h). */
    mbxV_vm_touched(ip->vm);
    mbxV_vm_shape_install(ip->vm, &ip->cfg, 1);
    if (!run_protected(ip->vm->L, mbxL_open_host_functions)) {
      mbxV_vm_shape_install(ip->vm, &ip->cfg, 0);
      return 0;
    }
    if (ip->cfg.shape_key) mbxV_vm_shape_save(ip->vm, &ip->cfg);
  }
  return run_protected(ip->vm->L, mbxL_reseed);
}

static void release(inproc *ip) {
  mbxV_watch_fini(&ip->watch); /* before the vm it points at goes */
  mbxV_checkpoint_free(&ip->checkpoint);
  if (ip->image.bytes)
    mbxV_vm_free_hibernated(&ip->image); /* its pages are gone: nothing in it is read */
  else if (ip->vm)
    mbxV_vm_free(ip->vm);
  mbxC_port_record_free(&ip->record);
  mbxC_port_local_free(&ip->port);
  free(ip->shape_key);
  free(ip);
}

static mbx_status inproc_create(const mbxH_services *svc, const mbx_policy *p,
                                const mbxC_snap_header *snap, mbxC_replay_log *replay, void **impl,
                                mbx_error *err) {
  inproc *ip = calloc(1, sizeof *ip);
  if (ip == NULL) return mbxH_shared_no_memory(replay, err);
  mbx_status made_port =
      mbxH_shared_port(svc, p, snap, replay, &ip->port, &ip->record, &ip->recording, err);
  if (made_port != MBX_OK) {
    free(ip);
    return made_port;
  }
  ip->svc = svc;
  mbxV_config cfg;
  mbxH_shared_config(svc, p, &cfg);
  /* One pass into a buffer on the stack for the common short list (a second pass only for a
     longer one): the key is built at every mbx_sandbox_new. */
  char shape_buf[512];
  size_t shape_len = mbxL_host_functions_shape(ip->port.port.grants, shape_buf, sizeof shape_buf);
  if (shape_len > 0 && shape_len <= MBXV_SHAPE_KEY_MAX &&
      (ip->shape_key = malloc(shape_len)) != NULL) {
    if (shape_len <= sizeof shape_buf)
      memcpy(ip->shape_key, shape_buf, shape_len);
    else
      mbxL_host_functions_shape(ip->port.port.grants, ip->shape_key, shape_len);
    cfg.shape_key = ip->shape_key;
    cfg.shape_key_len = shape_len;
  }
  ip->cfg = cfg;
  ip->host_call_limit = p->host_calls;
  /* A slot's template was built with no port (it holds nothing of one sandbox); math.random
     is seeded from this sandbox's port once the state is in place. */
  mbxV_new_result made = mbxV_vm_new(svc->slots, &cfg, mbxL_open_sandbox, &ip->vm);
  mbxV_watchdog *dog = *svc->dog;
  if (made == MBXV_NEW_OK && dog && !ip->port.grants.deterministic) {
    mbxV_watch_init(&ip->watch, dog, ip->vm);
    ip->vm->budget.watch = &ip->watch; /* kept by resets and rewinds (the budget is) */
  }
  if (made == MBXV_NEW_OK) {
    if (attach_port(ip)) {
      *impl = ip;
      return MBX_OK;
    }
  } else {
    ip->vm = NULL;
  }
  release(ip);
  /* The caps are the runtime's, kept by its slot pool (mbx_runtime_get_cap reads them there). */
  unsigned slots_cap;
  size_t reserve_cap;
  mbxV_pool_get_caps(svc->slots, &slots_cap, &reserve_cap);
  if (made == MBXV_NEW_CAP) return mbxH_shared_cap_refusal(svc, err);
  if (made == MBXV_NEW_RESERVE_CAP)
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: reserving %zu MiB of address space for the sandbox's heap "
                   "(8x MBX_LIMIT_MEMORY) would pass the runtime's cap MBX_CAP_RESERVED_BYTES "
                   "(%llu MiB, %llu MiB reserved); free sandboxes, lower the memory limit or "
                   "raise the cap",
                   mbxV_slot_size_for(cfg.memory_limit) >> 20,
                   (unsigned long long)(reserve_cap >> 20),
                   (unsigned long long)(mbxV_pool_reserved(svc->slots) >> 20));
  else if (made == MBXV_NEW_NO_SPACE)
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: cannot reserve %zu MiB of address space for the sandbox's "
                   "heap (8x MBX_LIMIT_MEMORY); lower the limit or free sandboxes",
                   mbxV_slot_size_for(cfg.memory_limit) >> 20);
  else
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: the standard library does not fit in the memory limit "
                   "(raise MBX_LIMIT_MEMORY)");
  return MBX_NO_MEMORY;
}

static void inproc_destroy(void *impl) {
  release(impl);
}

static void inproc_interrupt(void *impl) {
  inproc *ip = impl;
  mbxV_vm_interrupt(ip->vm);
}

static int inproc_paused(const void *impl) {
  const inproc *ip = impl;
  return mbxV_vm_paused(ip->vm);
}

static uint64_t inproc_heap_bytes(const void *impl) {
  const inproc *ip = impl;
  return mbxV_vm_heap_used(ip->vm);
}

static mbxC_port_record *inproc_recorder(void *impl) {
  inproc *ip = impl;
  return ip->recording ? &ip->record : NULL;
}

static mbx_status inproc_reset(void *impl, mbx_error *err) {
  inproc *ip = impl;
  /* A fresh address key, as a new sandbox would get: hashes shown in place of addresses must
     not match across the reset. */
  ip->cfg.address_key = mbxH_shared_address_key(ip->svc);
  if (mbxV_vm_reset(ip->vm, &ip->cfg, mbxL_open_sandbox) != MBXV_NEW_OK) {
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_reset: out of host memory while building "
                   "the pristine state; the sandbox refuses runs until a "
                   "reset succeeds");
    return MBX_NO_MEMORY;
  }
  /* io.stdin reads the host's bytes from their start again. */
  ip->port.stdin_source.pos = 0;
  /* Memory files and /tmp start empty again, as in a new sandbox. */
  if (mbxC_port_local_fs_reset(&ip->port) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_reset: the filesystem view could not be "
                   "made again: %s",
                   ip->port.fs_error.message);
    return MBX_NO_MEMORY;
  }
  /* Seeded again from the port's first draw, exactly as mbx_sandbox_new seeds: with a policy
     seed the sequence is the new sandbox's, without one it is fresh randomness. */
  mbxC_port_local_seek(&ip->port, 0);
  /* The pristine state is a new session: its log starts again (the seed draw below is its
     first record). */
  if (ip->recording) mbxC_port_record_restart(&ip->record);
  if (!attach_port(ip)) {
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_reset: could not seed math.random or "
                   "install the host functions");
    return MBX_NO_MEMORY;
  }
  return MBX_OK;
}

static mbx_status inproc_checkpoint(void *impl, mbx_error *err) {
  inproc *ip = impl;
  /* The memory files first (a copy of /tmp), kept only if the state's copy succeeds too. */
  mbxC_vfs_mark *files;
  mbx_status s = mbxH_shared_checkpoint_files(&ip->port, &files, err);
  if (s != MBX_OK) return s;
  mbxV_checkpoint_result made = mbxV_vm_checkpoint(ip->vm, &ip->checkpoint);
  if (made != MBXV_CHECKPOINT_OK) mbxC_vfs_mark_free(files);
  switch (made) {
  case MBXV_CHECKPOINT_OK:
    mbxH_shared_checkpoint_keep(&ip->port, &ip->record, files, &ip->checkpoint_port);
    return MBX_OK;
  case MBXV_CHECKPOINT_NO_MEMORY:
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_checkpoint: out of host memory for the "
                   "copy; the previous checkpoint (if any) is kept");
    return MBX_NO_MEMORY;
  case MBXV_CHECKPOINT_UNSUPPORTED:
    break;
  }
  return mbxH_shared_no_arena("mbx_sandbox_checkpoint", err);
}

static mbx_status inproc_rewind(void *impl, mbx_error *err) {
  inproc *ip = impl;
#ifdef MBX_ARENA_MALLOC
  (void)ip;
  return mbxH_shared_no_arena("mbx_sandbox_rewind", err);
#else
  if (ip->checkpoint.len == 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_rewind: the sandbox has no "
                   "checkpoint (call mbx_sandbox_checkpoint first)");
    return MBX_INVALID_ARGUMENT;
  }
  mbxV_vm_rewind(ip->vm, &ip->checkpoint);
  return mbxH_shared_rewind(&ip->port, &ip->record, ip->recording, &ip->checkpoint_port, err);
#endif
}

/* What every run and resume shares once the vm is back: the outcome becomes the result
   (*out stays NULL when host memory runs out: the public epilogue reports it). */
static mbx_status collect(inproc *ip, mbxV_status vs, const mbxV_refusal *why,
                          mbxV_outcome *outcome, int logged, mbx_result **out, mbx_error *err) {
  mbx_status s = mbxH_status_from_vm(vs);
  if (logged) mbxH_log_outcome(&ip->record, s, outcome);
  if (s < MBX_API_ERROR_BASE)
    *out = mbxH_result_new(outcome, &ip->vm->output);
  else
    mbxU_error_set(err, s, "%s", why->message);
  return s;
}

static mbx_status inproc_run(void *impl, const mbxH_run_args *a, mbx_result **out, mbx_error *err) {
  inproc *ip = impl;
  /* The guest may use MBXV_CSTACK_NEEDED below this call (vm/cstack.h). */
  if (mbxV_cstack_free() < MBXV_CSTACK_NEEDED) {
    mbxU_error_set(err, MBX_STACK_TOO_SMALL,
                   "%s: less than %zu KiB of C stack is left on this thread; run sandboxes "
                   "on a thread with a stack of at least %zu KiB (e.g. 8 MiB)",
                   a->fn, MBXV_CSTACK_NEEDED >> 10, MBXV_CSTACK_THREAD_MIN >> 10);
    return MBX_STACK_TOO_SMALL;
  }
  /* The C locale for the run: a host setlocale would change number formatting and string
     comparison, and strcoll over-reads in 5.4.4 (THREATS section 5, f623b969). */
  locale_t host_locale = uselocale(ip->svc->c_locale);
  char name[MBXH_CHUNK_NAME_SIZE];
  mbxH_shared_chunk_name(a->chunk_name, name);
  mbxV_outcome outcome;
  mbxC_port_local_run_begin(&ip->port);
  mbxL_run_begin(ip->vm->L);
  /* A source past the limit touches nothing (mbxV_run_cached refuses it): not a session
     event. */
  int logged = ip->recording && a->code_len <= ip->cfg.source_limit;
  if (logged)
    mbxC_port_record_run(&ip->record, a->chunk_name, a->code, a->code_len, a->inputs,
                         a->inputs_len);
  const char *code_text = a->code ? a->code : "";
  /* Deterministic mode bypasses the bytecode cache: a hit skips the parse and its charge, so
     the instruction count (and os.clock, which reads it) would depend on what ran before. */
  mbxV_bcache *cache = atomic_load(ip->svc->bytecode_on) && !ip->port.grants.deterministic
                           ? ip->svc->bytecode
                           : NULL;
  mbxV_refusal why = {MBXV_OK, ""};
  ip->vm->module_cache = cache;
  mbxV_status s = mbxV_run_cached(ip->vm, cache, code_text, a->code_len, name, a->inputs,
                                  a->inputs_len, &outcome, &why);
  uselocale(host_locale);
  /* Files are closed when a run ends, never by __gc (a paused run keeps them). */
  if (!mbxV_vm_paused(ip->vm)) mbxC_port_local_run_end(&ip->port);
  return collect(ip, s, &why, &outcome, logged, out, err);
}

static mbx_status inproc_resume(void *impl, const char *fn, const char *value, size_t len,
                                int as_error, mbx_result **out, mbx_error *err) {
  inproc *ip = impl;
  if (mbxV_cstack_free() < MBXV_CSTACK_NEEDED) {
    mbxU_error_set(err, MBX_STACK_TOO_SMALL,
                   "%s: less than %zu KiB of C stack is left on this thread", fn,
                   MBXV_CSTACK_NEEDED >> 10);
    return MBX_STACK_TOO_SMALL;
  }
  locale_t host_locale = uselocale(ip->svc->c_locale);
  mbxC_port_local_run_begin(&ip->port);
  mbxL_run_begin(ip->vm->L);
  mbxV_outcome outcome;
  if (ip->recording) mbxC_port_record_resume(&ip->record, as_error, value, len);
  mbxV_refusal why = {MBXV_OK, ""};
  ip->vm->module_cache = atomic_load(ip->svc->bytecode_on) && !ip->port.grants.deterministic
                             ? ip->svc->bytecode
                             : NULL;
  mbxV_status s = mbxV_resume(ip->vm, value, len, as_error, &outcome, &why);
  uselocale(host_locale);
  if (!mbxV_vm_paused(ip->vm)) mbxC_port_local_run_end(&ip->port);
  return collect(ip, s, &why, &outcome, ip->recording, out, err);
}

static mbx_status inproc_set_stdin(void *impl, const char *data, size_t len, int fd,
                                   mbx_error *err) {
  return mbxH_shared_set_stdin(&((inproc *)impl)->port, data, len, fd, err);
}

static mbx_status inproc_hibernate(void *impl, mbx_error *err) {
  inproc *ip = impl;
  if (ip->image.bytes) return MBX_OK;
  switch (mbxV_vm_hibernate(ip->vm, &ip->image)) {
  case MBXV_HIBERNATE_OK:
    return MBX_OK;
  case MBXV_HIBERNATE_NO_MEMORY:
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_hibernate: out of host memory for the image; the sandbox "
                   "stays awake");
    return MBX_NO_MEMORY;
  case MBXV_HIBERNATE_UNSUPPORTED:
    break;
  }
  return mbxH_shared_no_arena("mbx_sandbox_hibernate", err);
}

static mbx_status inproc_wake(void *impl, mbx_error *err) {
  inproc *ip = impl;
  switch (mbxV_vm_wake(&ip->image)) {
  case MBXV_WAKE_OK:
    return MBX_OK;
  case MBXV_WAKE_NO_MEMORY:
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "waking the hibernated sandbox: the kernel gave no memory for its heap's "
                   "pages; it stays hibernated (try again)");
    return MBX_NO_MEMORY;
  case MBXV_WAKE_CORRUPT:
    break;
  }
  mbxU_error_set(err, MBX_INTERNAL_ERROR,
                 "waking the hibernated sandbox: its heap image does not decode; free it");
  return MBX_INTERNAL_ERROR;
}

static mbxC_vfs *inproc_files(void *impl) {
  return ((inproc *)impl)->port.vfs;
}

const mbxH_backend mbxH_inproc_backend = {.version = MBXH_BACKEND_VERSION,
                                          .name = "in-process",
                                          .create = inproc_create,
                                          .destroy = inproc_destroy,
                                          .run = inproc_run,
                                          .resume = inproc_resume,
                                          .reset = inproc_reset,
                                          .checkpoint = inproc_checkpoint,
                                          .rewind = inproc_rewind,
                                          .interrupt = inproc_interrupt,
                                          .paused = inproc_paused,
                                          .heap_bytes = inproc_heap_bytes,
                                          .recorder = inproc_recorder,
                                          .files = inproc_files,
                                          .set_stdin = inproc_set_stdin,
                                          .hibernate = inproc_hibernate,
                                          .wake = inproc_wake};
