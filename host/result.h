/* host/result.h -- the result contract object built from a run's outcome. */
#ifndef MBX_HOST_RESULT_H
#define MBX_HOST_RESULT_H

#include <stdatomic.h>

#include "include/moonbox.h"
#include "vm/run.h"

struct mbx_result {
  mbx_status status;
  /* The whole contract, built on the first mbx_result_json (most hosts read the parts, and
     building it cost more than the rest of a small run): published once with a
     compare-and-swap, so concurrent readers of one result agree on one copy. */
  _Atomic(char *) json;
  _Atomic size_t json_len; /* a pure function of the result: racing builders store the same */
  mbxV_outcome outcome;    /* value JSON, error, usage */
  char *stream[2];         /* captured stdout, stderr ("" not allocated when empty) */
  size_t stream_len[2];
  mbx_usage usage;
};

/* The public status of a vm status (the vm has its own enum: vm/status.h). */
mbx_status mbxH_status_from_vm(mbxV_status s);

/* Build a result from an outcome (taken over: the caller must not free it) and the captured
   output. NULL when host memory ran out (the outcome is then freed). */
mbx_result *mbxH_result_new(mbxV_outcome *outcome, const mbxV_output *output);

/* The outcome record of a run or resume for the record/replay log (capabilities/
   port_record.h): the status, a hash of the value, pending call and error message, and the
   host call count, which is what a replay must reproduce. Not the instruction count: it is
   not reproducible (capabilities/replay.h). Both backends (host/backend/inproc.c, host/backend/worker.c)
   log through this. */
struct mbxC_port_record;
void mbxH_log_outcome(struct mbxC_port_record *record, mbx_status s, const mbxV_outcome *o);

#endif
