/* capabilities/port.h -- the one narrow interface through which the stdlib reaches outside the VM.
 */
#ifndef MBX_CAPABILITIES_PORT_H
#define MBX_CAPABILITIES_PORT_H

/*
** Plain C only: no Lua type appears here (capabilities/ knows nothing of Lua). The stdlib
** calls these operations with C arguments; the default implementation below serves them
** in-process from the sandbox's copy of its policy, and a later worker mode serves the same
** table from another process. Later issues add files, exec and host calls.
**
** Every operation is called on the thread running the sandbox, never concurrently, and must
** not call back into the VM. None of them raises or longjmps.
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/ffi.h"
#include "capabilities/policy.h"
#include "capabilities/replay.h"
#include "include/moonbox.h"

typedef struct mbxC_port {
  void *ud; /* passed to every operation */
  /* Wall-clock time in whole seconds since the Unix epoch (UTC): the real clock, or the time
     the policy fixed (mbx_policy_set_time). */
  int64_t (*wall_time)(void *ud);
  /* CPU seconds the current run has used so far (os.clock). */
  double (*cpu_time)(void *ud);
  /* Two 64-bit words to seed math.random with. The first call for a sandbox gives its
     initial seed; later calls (math.randomseed() with no argument) give fresh ones. With a
     policy seed N the first call gives {N, 0} (what math.randomseed(N) uses in stock Lua)
     and later calls a fixed sequence derived from N; without one, kernel randomness. */
  void (*random_seed)(void *ud, uint64_t seed[2]);
  /* The value of the virtual environment variable name (name_len bytes), or NULL when the
     policy does not define it. The value is NUL-terminated, *value_len gets its length, and
     it stays valid until the port is freed. Nothing is read from the host's environment. */
  const char *(*env_get)(void *ud, const char *name, size_t name_len, size_t *value_len);
  /* Nonzero in deterministic mode (mbx_policy_set_deterministic). A plain field, not an
     operation: pairs/next read it on every call, so it must cost one load. The stdlib checks
     it at call time, never at open: a sandbox's state is restored from a template built
     without a port. */
  int deterministic;
  /* The granted host functions (names, kinds), a copy owned by the port; the stdlib installs
     them into the guest's globals after a state is restored (templates hold none). */
  const mbxC_hostfn_table *host_fns;
  /* Call synchronous host function `index` of host_fns with the arguments' JSON. Returns
     MBXC_CALL_VALUE with *reply the JSON value (length 0: no value) or MBXC_CALL_ERROR with
     *reply the message the guest's error carries. The bytes stay valid until the next
     host_call. The host's callback runs in here; nothing in it can unwind Lua. */
  mbxC_call_result (*host_call)(void *ud, size_t index, const char *args, size_t args_len,
                                const char **reply, size_t *reply_len);
  /* Call native function `index` of host_fns (kind NATIVE) with its sig->nargs arguments,
     already converted and range-checked. Returns MBXC_CALL_VALUE with the result in *ret
     (and, for an 'o' return, the output bytes in *bytes and *len, valid until the next call), or
     MBXC_CALL_ERROR with *bytes the message for the guest (an 'o' length past the buffer,
     no memory for the buffer). Nothing in the native function can unwind Lua. */
  mbxC_call_result (*native_call)(void *ud, size_t index, const mbxC_ffi_value *args,
                                  mbxC_ffi_value *ret, const char **bytes, size_t *len);
} mbxC_port;

/* The in-process implementation: the policy's settings copied at sandbox creation. */
typedef struct mbxC_port_local {
  mbxC_port port; /* port.ud points at this struct: do not move it once initialized */
  int time_fixed;
  int64_t time;
  int seed_fixed;
  uint64_t seed;
  uint64_t draws; /* random_seed calls so far */
  mbxC_env_var *env;
  size_t env_count;
  uint64_t cpu_start_ns; /* thread CPU clock when the current run began */
  mbxC_hostfn_table host_fns; /* copied from the policy */
  struct mbx_host_reply reply; /* reused by every host call */
  char *native_out; /* MBX_NATIVE_OUT_MAX bytes for 'o' returns, made at the first one */
  char native_error[MBXC_MAX_HOSTFN_NAME + 128]; /* a native call's message for the guest */
  /* The replay log (capabilities/replay.h), kept for deterministic policies only. Live: every
     answer is appended as it is given. Replaying (mbx_sandbox_restore): every answer is read
     from the log at `cursor` instead, after checking that the request is the one recorded;
     the host's callbacks and clocks are not consulted. */
  int logging;
  int replaying;
  size_t cursor;
  uint64_t chain0;
  mbxC_replay_log log;
  char diverged[320]; /* replaying: the first divergence, naming the record; "" while none */
} mbxC_port_local;

/* Copy what the port needs from p (the environment too) and fill pl->port. Returns 0, or -1
   when out of memory (pl is then empty and needs no mbxC_port_local_free). */
int mbxC_port_local_init(mbxC_port_local *pl, const mbx_policy *p);
/* Release the copies. Never fails; a zeroed pl is fine. */
void mbxC_port_local_free(mbxC_port_local *pl);
/* A run begins on the calling thread: os.clock counts from here. */
void mbxC_port_local_run_begin(mbxC_port_local *pl);

/* Start (or restart, dropping every record) the replay log, its chain beginning at chain0. */
void mbxC_port_log_begin(mbxC_port_local *pl, uint64_t chain0);
/* Replay mode: answers come from log (the port takes it over, with the records to replay;
   logging goes on after them once mbxC_port_replay_end is called). */
void mbxC_port_replay_begin(mbxC_port_local *pl, mbxC_replay_log *log);
/* Back to live answers. Returns 0, or -1 with pl->diverged set when records were left over. */
int mbxC_port_replay_end(mbxC_port_local *pl);
/* Session records (host/api.c): appended when live; when replaying, checked against the
   record at the cursor (a mismatch sets pl->diverged). */
void mbxC_port_session_run(mbxC_port_local *pl, const char *chunk_name, const char *code,
                           size_t code_len, const char *inputs, size_t inputs_len);
void mbxC_port_session_resume(mbxC_port_local *pl, int as_error, const char *value, size_t len);
void mbxC_port_session_outcome(mbxC_port_local *pl, uint32_t status, uint64_t hash,
                               uint64_t host_calls);

#endif
