/* host/sandbox.c -- the public C API of sandboxes: argument checks, the busy claim, poisoning
   and the runtime's heap estimate, over the runtime's backend (host/backend/backend.h). */
#include "host/sandbox.h"

#include <sched.h>
#include <stdlib.h>

#include <lua.h>

#include "capabilities/policy.h"
#include "host/result.h"
#include "host/runtime.h"
#include "common/error.h"
#include "vm/budget.h"

/* Bring rt->heap_total up to date with this sandbox's heap (unsigned arithmetic wraps, so a
   shrink is a subtraction). */
static void count_heap(mbx_sandbox *sb) {
  uint64_t now = sb->backend->heap_bytes(sb->impl);
  if (now == sb->heap_counted) return; /* no write to the line every thread shares */
  atomic_fetch_add(&sb->rt->heap_total, now - sb->heap_counted);
  sb->heap_counted = now;
}

int mbxH_busy_take(mbx_sandbox *sb) {
  int seen = 0;
  while (!atomic_compare_exchange_weak(&sb->busy, &seen, 1)) {
    if (seen == 1) return 0;
    /* 0 (a spurious failure) or 2: the idle sweep holds it for one hibernation, tens of
       microseconds; the call waits that out rather than failing (host/hibernate.c). */
    if (seen == 2) sched_yield();
    seen = 0;
  }
  return 1;
}

int mbxH_sandbox_claim(mbx_sandbox *sb, const char *fn, mbx_error *err) {
  if (mbxH_busy_take(sb)) return 1;
  mbxU_error_set(err, MBX_SANDBOX_BUSY, "%s: the sandbox is running on another thread", fn);
  return 0;
}

int mbxH_sandbox_claim_awake(mbx_sandbox *sb, const char *fn, mbx_status *why, mbx_error *err) {
  if (!mbxH_sandbox_claim(sb, fn, err)) {
    *why = MBX_SANDBOX_BUSY;
    return 0;
  }
  *why = mbxH_wake(sb, fn, err);
  if (*why == MBX_OK) return 1;
  atomic_store(&sb->busy, 0);
  return 0;
}

void mbxH_sandbox_release(mbx_sandbox *sb) {
  if (sb->listed) {
    /* Idle from now on, for the sweep (host/hibernate.c); then the sweep's chance to run. */
    atomic_store_explicit(&sb->used_ns, mbxV_now_coarse_ns(), memory_order_relaxed);
    atomic_store(&sb->busy, 0);
    mbxH_idle_tick(sb->rt);
    return;
  }
  atomic_store(&sb->busy, 0);
}

mbx_sandbox *mbxH_sandbox_create(mbx_runtime *rt, const mbx_policy *p, mbxC_replay_log *replay,
                                 mbx_error *err) {
  mbx_sandbox *sb = calloc(1, sizeof *sb);
  if (sb == NULL) {
    if (replay) mbxC_replay_free(replay);
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
    return NULL;
  }
  sb->rt = rt;
  sb->backend = rt->backend;
  if (p->deterministic) {
    /* Only a deterministic sandbox can be replayed: only it keeps a log. */
    sb->snap = (mbxC_snap_header){.format = MBXC_SNAP_FORMAT,
                                  .lua_version = LUA_VERSION_RELEASE_NUM,
                                  .moonbox_version = MBX_VERSION_NUMBER,
                                  .build_id = mbxC_build_id(),
                                  .policy_digest = mbxC_policy_digest(p),
                                  .seed_fixed = p->seed_fixed != 0,
                                  .seed = p->seed_fixed ? p->seed : 0,
                                  .time_fixed = p->time_fixed != 0,
                                  .time = p->time_fixed ? p->time : 0};
    /* Each mount as the blob's header records it (a restore names the one that changed). */
    for (size_t i = 0; i < p->fs.mount_count; i++) {
      const mbxC_fs_mount *m = &p->fs.mounts[i];
      if (mbxC_snap_add_mount(&sb->snap, m->path, m->mode, m->host) != 0) {
        mbxC_snap_header_free(&sb->snap);
        free(sb);
        if (replay) mbxC_replay_free(replay);
        mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
        return NULL;
      }
    }
  }
  if (sb->backend->create(&rt->services, p, p->deterministic ? &sb->snap : NULL, replay, &sb->impl,
                          err) != MBX_OK) {
    mbxC_snap_header_free(&sb->snap);
    free(sb);
    return NULL;
  }
  sb->heap_counted = sb->backend->heap_bytes(sb->impl);
  uint64_t heap_cap = atomic_load(&rt->heap_cap);
  uint64_t heap_total = atomic_fetch_add(&rt->heap_total, sb->heap_counted) + sb->heap_counted;
  if (heap_cap && heap_total > heap_cap) {
    mbx_sandbox_free(sb);
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: the live sandboxes' guest heaps would total %llu KiB, "
                   "past the runtime's cap MBX_CAP_HEAP_BYTES (%llu KiB); free or reset "
                   "sandboxes, or raise the cap with mbx_runtime_set_cap",
                   (unsigned long long)(heap_total >> 10), (unsigned long long)(heap_cap >> 10));
    return NULL;
  }
  mbxH_idle_join(sb);
  return sb;
}

MBX_API mbx_sandbox *mbx_sandbox_new(mbx_runtime *rt, const mbx_policy *p, mbx_error *err) {
  if (rt == NULL || p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_new: the runtime and the policy "
                   "must not be NULL");
    return NULL;
  }
  if (mbxC_policy_needs_instructions(p)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_new: a deterministic policy needs an instruction limit: set "
                   "MBX_LIMIT_INSTRUCTIONS (a deterministic run ends by its instruction count, "
                   "never by the clock)");
    return NULL;
  }
  return mbxH_sandbox_create(rt, p, NULL, err);
}

MBX_API void mbx_sandbox_free(mbx_sandbox *sb) {
  if (sb == NULL) return;
  mbxH_idle_leave(sb); /* first: the sweep may hold it until then */
  /* An interrupt (or paused) from another thread may still be leaving: its interrupt can end
     the run that came before this free, and it touches the sandbox once more after that (its
     peek count). Waited out, so the memory is never written after it is freed. */
  while (atomic_load(&sb->peeking) != 0)
    sched_yield();
  atomic_fetch_sub(&sb->rt->heap_total, sb->heap_counted);
  sb->backend->destroy(sb->impl);
  mbxC_snap_header_free(&sb->snap);
  free(sb);
}

MBX_API mbx_status mbx_sandbox_interrupt(mbx_sandbox *sb) {
  if (sb == NULL) return MBX_INVALID_ARGUMENT;
  /* A hibernated sandbox runs nothing, and every run clears the flag when it starts: the
     interrupt has nothing to stop (and its state has no pages to write to). */
  atomic_fetch_add(&sb->peeking, 1);
  if (!atomic_load(&sb->asleep)) sb->backend->interrupt(sb->impl);
  atomic_fetch_sub(&sb->peeking, 1);
  return MBX_OK;
}

MBX_API int mbx_sandbox_poisoned(const mbx_sandbox *sb) {
  return sb ? sb->poisoned : 0;
}

MBX_API int mbx_sandbox_paused(const mbx_sandbox *sb) {
  if (sb == NULL) return 0;
  mbx_sandbox *m = (mbx_sandbox *)sb; /* the peek count only */
  atomic_fetch_add(&m->peeking, 1);
  int paused = atomic_load(&m->asleep)
                   ? atomic_load_explicit(&m->asleep_paused, memory_order_relaxed)
                   : sb->backend->paused(sb->impl);
  atomic_fetch_sub(&m->peeking, 1);
  return paused;
}

MBX_API mbx_status mbx_sandbox_reset(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_reset: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbx_status why;
  if (!mbxH_sandbox_claim_awake(sb, "mbx_sandbox_reset", &why, err)) return why;
  mbx_status s = sb->backend->reset(sb->impl, err);
  sb->poisoned = s != MBX_OK;
  sb->poisoned_by = s != MBX_OK ? MBX_INTERNAL_ERROR : MBX_OK;
  count_heap(sb);
  mbxH_sandbox_release(sb);
  return s;
}

MBX_API mbx_status mbx_sandbox_reset_keep_files(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_reset_keep_files: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbx_status why;
  if (!mbxH_sandbox_claim_awake(sb, "mbx_sandbox_reset_keep_files", &why, err)) return why;
  /* The backend's reset empties the view through its journal, so a mark taken just before
     brings every file back (the nodes are kept, nothing is copied). */
  mbxC_vfs *v = sb->backend->files ? sb->backend->files(sb->impl) : NULL;
  mbxC_vfs_mark *mark = v ? mbxC_vfs_mark_take(v) : NULL;
  mbx_status s;
  if (v && mark == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_reset_keep_files: out of host memory");
    s = MBX_NO_MEMORY; /* nothing changed */
  } else {
    s = sb->backend->reset(sb->impl, err);
    if (s == MBX_OK && mark && mbxC_vfs_mark_restore(v, mark) != 0) {
      mbxU_error_set(err, MBX_NO_MEMORY,
                     "mbx_sandbox_reset_keep_files: out of host memory: the files were "
                     "reset too");
      s = MBX_NO_MEMORY;
    }
    sb->poisoned = s != MBX_OK;
    sb->poisoned_by = s != MBX_OK ? MBX_INTERNAL_ERROR : MBX_OK;
  }
  mbxC_vfs_mark_free(mark);
  count_heap(sb);
  mbxH_sandbox_release(sb);
  return s;
}

MBX_API mbx_status mbx_sandbox_checkpoint(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_checkpoint: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbx_status why;
  if (!mbxH_sandbox_claim_awake(sb, "mbx_sandbox_checkpoint", &why, err)) return why;
  mbx_status s = sb->backend->checkpoint(sb->impl, err);
  if (s == MBX_OK) {
    sb->checkpoint_poisoned = sb->poisoned;
    sb->checkpoint_poisoned_by = sb->poisoned_by;
  }
  mbxH_sandbox_release(sb);
  return s;
}

MBX_API mbx_status mbx_sandbox_rewind(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_rewind: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbx_status why;
  if (!mbxH_sandbox_claim_awake(sb, "mbx_sandbox_rewind", &why, err)) return why;
  mbx_status s = sb->backend->rewind(sb->impl, err);
  if (s == MBX_OK) {
    sb->poisoned = sb->checkpoint_poisoned;
    sb->poisoned_by = sb->checkpoint_poisoned_by;
    count_heap(sb);
  }
  mbxH_sandbox_release(sb);
  return s;
}

MBX_API mbx_status mbx_sandbox_set_stdin(mbx_sandbox *sb, const char *data, size_t len,
                                         mbx_error *err) {
  if (sb == NULL || (data == NULL && len > 0)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_set_stdin: the sandbox must not be NULL, nor data with a length");
    return MBX_INVALID_ARGUMENT;
  }
  if (sb->backend->set_stdin == NULL) {
    mbxU_error_set(err, MBX_UNSUPPORTED, "mbx_sandbox_set_stdin: the %s backend has no stdin",
                   sb->backend->name);
    return MBX_UNSUPPORTED;
  }
  if (!mbxH_sandbox_claim(sb, "mbx_sandbox_set_stdin", err)) return MBX_SANDBOX_BUSY;
  mbx_status s = sb->backend->set_stdin(sb->impl, data, len, -1, err);
  mbxH_sandbox_release(sb);
  return s;
}

MBX_API mbx_status mbx_sandbox_set_stdin_fd(mbx_sandbox *sb, int fd, mbx_error *err) {
  if (sb == NULL || fd < 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_set_stdin_fd: the sandbox must not be NULL, nor fd negative");
    return MBX_INVALID_ARGUMENT;
  }
  if (sb->backend->set_stdin == NULL) {
    mbxU_error_set(err, MBX_UNSUPPORTED, "mbx_sandbox_set_stdin_fd: the %s backend has no stdin",
                   sb->backend->name);
    return MBX_UNSUPPORTED;
  }
  if (!mbxH_sandbox_claim(sb, "mbx_sandbox_set_stdin_fd", err)) return MBX_SANDBOX_BUSY;
  mbx_status s = sb->backend->set_stdin(sb->impl, NULL, 0, fd, err);
  mbxH_sandbox_release(sb);
  return s;
}

/* ---- runs and resumes: one claim, one epilogue ---- */

static int poisons(mbx_status s) {
  return s != MBX_OK && s != MBX_SYNTAX_ERROR && s != MBX_RUNTIME_ERROR && s != MBX_PAUSED;
}

/* The checks every run and resume make before anything runs; returns MBX_OK with the sandbox
   claimed, or the refusal (err filled, the sandbox left as it was). */
static mbx_status begin_call(mbx_sandbox *sb, const char *fn, int resuming, mbx_error *err) {
  /* busy first: only the thread that owns the run may read what the run writes. */
  if (!mbxH_busy_take(sb)) {
    if (resuming)
      mbxU_error_set(err, MBX_SANDBOX_BUSY, "%s: the sandbox is running on another thread", fn);
    else
      mbxU_error_set(err, MBX_SANDBOX_BUSY,
                     "mbx_run: the sandbox is already running on another thread");
    return MBX_SANDBOX_BUSY;
  }
  mbx_status s = mbxH_wake(sb, fn, err); /* every check below may read the backend's state */
  if (s != MBX_OK) {
    atomic_store(&sb->busy, 0);
    return s;
  }
  if (sb->poisoned) {
    s = MBX_SANDBOX_POISONED;
    if (resuming)
      mbxU_error_set(err, s, "%s: this sandbox ended a run with %s and refuses further runs", fn,
                     mbx_status_key(sb->poisoned_by));
    else
      mbxU_error_set(err, s,
                     "this sandbox ended a run with %s and refuses further runs; reset it "
                     "(mbx_sandbox_reset), rewind it to an earlier checkpoint, or free it and "
                     "create a new one",
                     mbx_status_key(sb->poisoned_by));
  } else if (!resuming && sb->backend->paused(sb->impl)) {
    s = MBX_SANDBOX_PAUSED;
    mbxU_error_set(err, s,
                   "mbx_run: the sandbox is paused at an external call; continue it with "
                   "mbx_resume or mbx_resume_error, or abandon the run with mbx_sandbox_reset");
  } else if (resuming && !sb->backend->paused(sb->impl)) {
    s = MBX_INVALID_ARGUMENT;
    mbxU_error_set(err, s, "%s: the sandbox is not paused at an external call", fn);
  }
  if (s != MBX_OK) mbxH_sandbox_release(sb);
  return s;
}

static mbx_status end_call(mbx_sandbox *sb, const char *fn, mbx_status s, mbx_result **out,
                           mbx_error *err) {
  if (s < MBX_API_ERROR_BASE) {
    if (poisons(s)) {
      sb->poisoned = 1;
      sb->poisoned_by = s;
    }
    if (*out == NULL) {
      mbxU_error_set(err, MBX_NO_MEMORY, "%s: out of host memory for the result", fn);
      s = MBX_NO_MEMORY;
    }
    count_heap(sb);
  }
  mbxH_sandbox_release(sb);
  return s;
}

MBX_API mbx_status mbx_run_named(mbx_sandbox *sb, const char *code, size_t code_len,
                                 const char *chunk_name, const char *inputs_json, size_t inputs_len,
                                 mbx_result **out, mbx_error *err) {
  if (out) *out = NULL;
  if (sb == NULL || out == NULL || (code == NULL && code_len > 0) ||
      (inputs_json == NULL && inputs_len > 0)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_run: the sandbox and out must not be NULL, nor code/inputs with a length");
    return MBX_INVALID_ARGUMENT;
  }
  mbx_status s = begin_call(sb, "mbx_run", 0, err);
  if (s != MBX_OK) return s;
  mbxH_run_args a = {.fn = "mbx_run",
                     .code = code,
                     .code_len = code_len,
                     .chunk_name = chunk_name,
                     .inputs = inputs_json,
                     .inputs_len = inputs_len};
  return end_call(sb, "mbx_run", sb->backend->run(sb->impl, &a, out, err), out, err);
}

MBX_API mbx_status mbx_run(mbx_sandbox *sb, const char *code, size_t code_len,
                           const char *inputs_json, size_t inputs_len, mbx_result **out,
                           mbx_error *err) {
  return mbx_run_named(sb, code, code_len, "input", inputs_json, inputs_len, out, err);
}

static mbx_status resume(mbx_sandbox *sb, const char *fn, const char *value, size_t len,
                         int as_error, mbx_result **out, mbx_error *err) {
  if (out) *out = NULL;
  if (sb == NULL || out == NULL || (value == NULL && len > 0)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "%s: the sandbox and out must not be NULL, nor the value with a length", fn);
    return MBX_INVALID_ARGUMENT;
  }
  mbx_status s = begin_call(sb, fn, 1, err);
  if (s != MBX_OK) return s;
  if (as_error && len > MBX_HOST_ERROR_MAX) len = MBX_HOST_ERROR_MAX;
  return end_call(sb, fn, sb->backend->resume(sb->impl, fn, value, len, as_error, out, err), out,
                  err);
}

MBX_API mbx_status mbx_resume(mbx_sandbox *sb, const char *value_json, size_t len, mbx_result **out,
                              mbx_error *err) {
  return resume(sb, "mbx_resume", value_json, len, 0, out, err);
}

MBX_API mbx_status mbx_resume_error(mbx_sandbox *sb, const char *message, size_t len,
                                    mbx_result **out, mbx_error *err) {
  return resume(sb, "mbx_resume_error", message ? message : "", message ? len : 0, 1, out, err);
}
