/* vm/run.h -- one run: bind inputs, load text, resume the chunk's thread, collect the outcome. */
#ifndef MBX_VM_RUN_H
#define MBX_VM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "vm/bytecode_cache.h"
#include "vm/errors.h"
#include "vm/status.h"
#include "vm/vm.h"

typedef struct mbxV_outcome {
  mbxV_status status; /* how the run ended (< MBXV_REFUSED_BASE) */
  char *value_json;   /* malloc'd or value_inline; "null" when the run failed */
  size_t value_len;
  /* A small value's text (nil, a boolean, a number, a short string: most runs), so that it
     needs no allocation of its own. value_json points here then: move an outcome with
     mbxV_outcome_move, never a plain struct copy. */
  char value_inline[40];
  int failed; /* error below is filled */
  mbxV_error_info error;
  uint64_t instructions;
  int uncounted; /* the run had no count hook (vm/watchdog.h): instructions is no count */
  uint64_t wall_us;
  uint64_t memory_peak;
  uint64_t output_bytes;
  int exited;          /* the run ended by os.exit (status ok or runtime_error) */
  int64_t exit_code;   /* its code: 0 for os.exit(), os.exit(true) and os.exit(0) */
  uint64_t host_calls; /* host calls and pauses of the run so far (across resumes) */
  uint64_t exec_runs;  /* programs started in the exec backend (across resumes) */
  uint64_t exec_ms;    /* their wall-clock milliseconds */
  char *pending_json;  /* malloc'd when status is MBXV_PAUSED: {"args":[..],"function":".."} */
  size_t pending_len;
} mbxV_outcome;

/*
** Run code (text only) in vm. On a run status (< MBXV_REFUSED_BASE) *out is filled and owned
** by the caller (mbxV_outcome_free). On a refusal (bad inputs, source too large, host out of
** memory) nothing ran, nothing was bound, and err says why.
*/
mbxV_status mbxV_run(mbxV_vm *vm, const char *code, size_t code_len, const char *chunk_name,
                     const char *inputs, size_t inputs_len, mbxV_outcome *out, mbxV_refusal *err);

/* mbxV_run with the runtime's bytecode cache (NULL = none): the chunk is loaded from the
   cached compile of this exact text when there is one, and a clean compile is stored. Only
   for source the host gave (mbx_run), never for text the guest produced. */
mbxV_status mbxV_run_cached(mbxV_vm *vm, mbxV_bcache *cache, const char *code, size_t code_len,
                            const char *chunk_name, const char *inputs, size_t inputs_len,
                            mbxV_outcome *out, mbxV_refusal *err);

/* Store the pending call's JSON (the string on top of L, popped) for the run to pause with:
   the registry at mbxV_key_pending, and the vm's flag that mirrors it (vm/vm.h). May raise
   (the registry may grow). */
void mbxV_set_pending(lua_State *L);

/* The upvalue whose lua_upvalueid is id is about to change (debug.setupvalue, upvaluejoin):
   when it is the _ENV of the main chunk kept for a repeated text, that chunk is forgotten, so
   the next run of the text loads it afresh (a kept function must stay as loaded). Never
   raises, never allocates. */
void mbxV_memo_forget_upvalue(lua_State *L, const void *id);

/*
** A run pauses when the layer above stores the pending call's JSON with mbxV_set_pending and
** yields the run thread (stdlib/hostcall.c); vm->paused is then set.
** mbxV_resume continues it. as_error == 0: value (NULL/0 = no value) is JSON the call
** returns; bad JSON returns MBXV_INVALID_INPUT with nothing changed (still paused).
** as_error != 0: value is the message of the error the call raises. The yield receives
** (true, value) or (true) for no value, and (false, message) for an error: the layer above
** returns or raises accordingly. Otherwise like mbxV_run: a run status with *out filled
** (possibly MBXV_PAUSED again).
*/
mbxV_status mbxV_resume(mbxV_vm *vm, const char *value, size_t len, int as_error, mbxV_outcome *out,
                        mbxV_refusal *err);

void mbxV_outcome_free(mbxV_outcome *out);
/* *dst = *src, value_json re-pointed when it is src's value_inline; src is then dst's to
   forget (not freed). */
void mbxV_outcome_move(mbxV_outcome *dst, const mbxV_outcome *src);

#endif
