/* host/backend/worker.h -- the worker backend's runtime-wide part: the zygote and the warm pool. */
#ifndef MBX_HOST_WORKER_H
#define MBX_HOST_WORKER_H

#include <stdint.h>

#include "include/moonbox.h"

typedef struct mbxH_wpool mbxH_wpool;

/* The pool of a runtime whose sandboxes run in workers (MBX_CAP_ISOLATE): nothing is started
   until the first sandbox. worker_path is the moonbox-worker to start (absolute). NULL when
   out of memory. */
mbxH_wpool *mbxH_wpool_new(const char *worker_path);
/* Kill the warm workers and end the zygote (no process or fd is left). NULL is fine. */
void mbxH_wpool_free(mbxH_wpool *pool);
/* What a worker's jail applies on this machine: the zygote (started if need be) forks a child
   through the same jail and reports MBXH_JAIL_* | MBXH_WP_NS_* bits, and in *jail_us the
   microseconds from that fork to the child's exit. MBX_OK, or MBX_UNSUPPORTED /
   MBX_INTERNAL_ERROR with err saying why. */
mbx_status mbxH_wpool_probe(mbxH_wpool *pool, uint32_t *bits, uint32_t *jail_us,
                            mbx_error *err);
/* Workers a one-tenant runtime keeps from freed sandboxes (for MBX_CAP_ONE_TENANT's usage). */
unsigned mbxH_wpool_kept(mbxH_wpool *pool);
/* Live isolated sandboxes (for MBX_CAP_SANDBOXES). */
unsigned mbxH_wpool_live(mbxH_wpool *pool);

/* Runs after which a one-tenant runtime's worker is ended instead of kept for the next
   sandbox (MBX_CAP_ONE_TENANT). */
#define MBXH_WORKER_TENANT_RUNS_MAX 1000
/* Warm workers the pool keeps forked ahead of demand. */
#define MBXH_WORKER_WARM 2
/* The hard SIGKILL backstop of a run: 2x its time limit plus this grace, or the default when
   it has none (the time the host's callbacks take does not count; file operations do). Also
   how long a worker has to stop after mbx_sandbox_interrupt. */
#define MBXH_WORKER_GRACE_MS 2000
#define MBXH_WORKER_BACKSTOP_DEFAULT_MS 120000
/* Creating, resetting, checkpointing: no guest code runs, but a worker may still hang. */
#define MBXH_WORKER_CONTROL_MS 30000

#endif
