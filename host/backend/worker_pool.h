/* host/backend/worker_pool.h -- the worker backend's runtime-wide part: the zygote and the warm
   pool. */
#ifndef MBX_HOST_WORKER_POOL_H
#define MBX_HOST_WORKER_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "host/backend/worker_proto.h"
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
mbx_status mbxH_wpool_probe(mbxH_wpool *pool, uint32_t *bits, uint32_t *jail_us, mbx_error *err);
/* Workers a one-tenant runtime keeps from freed sandboxes (for MBX_CAP_ONE_TENANT's usage). */
unsigned mbxH_wpool_kept(mbxH_wpool *pool);
/* Live isolated sandboxes (for MBX_CAP_SANDBOXES). */
unsigned mbxH_wpool_live(mbxH_wpool *pool);

/* Runs after which a one-tenant runtime's worker is ended instead of kept for the next
   sandbox (MBX_CAP_ONE_TENANT). */
#define MBXH_WORKER_TENANT_RUNS_MAX 1000
/* Warm workers the pool keeps forked ahead of demand. */
#define MBXH_WORKER_WARM 2

/* ---- what the worker backend (host/backend/worker.c) takes from the pool ---- */

/* One worker process, as the pool hands it to a sandbox and takes it back. */
typedef struct mbxH_wproc {
  pid_t pid;
  int sock; /* -1: none */
  int pidfd;
  /* A worker kept for the next sandbox of a one-tenant runtime (MBX_CAP_ONE_TENANT): the
     memory limit its address-space limit was set for (only a sandbox of the same limit may
     take it) and the runs it has served. */
  uint64_t memory_limit;
  unsigned runs;
  uint32_t zid; /* the zygote that forked it (zygote.id) */
  /* A warm worker primed for a policy: sent a sandbox's CREATE ahead of demand, it builds the
     state while it waits. primed holds that CREATE's frame but for its last MBXH_CREATE_OWN
     bytes (what differs between two sandboxes of one policy: the address key and the first
     seed), primed_key its address key; NULL when it was sent nothing. */
  unsigned char *primed;
  size_t primed_len;
  uint64_t primed_key;
} mbxH_wproc;
/* The tail of a CREATE frame that is the sandbox's own: whether it was sent ahead (a prime),
   its address key and its first seed. */
#define MBXH_CREATE_OWN (1 + 3 * sizeof(uint64_t))
/* A CREATE offered for the worker forked to replace a freed one: the frame (its last
   MBXH_CREATE_OWN bytes that worker's own) and the address key in it. */
typedef struct mbxH_prime_offer {
  const mbxH_wp_writer *frame;
  uint64_t key;
} mbxH_prime_offer;

/* A worker for a new sandbox (*p; *reused when it served a sandbox before): one kept for a
   sandbox of this memory limit when the runtime is one tenant, else a warm one, the zygote
   started or re-executed as needed. fp, fp_len: the sandbox's CREATE frame but for its own
   tail (MBXH_CREATE_OWN), which a warm worker may have been primed with; NULL when the sandbox
   cannot take a primed worker. Counts the sandbox live. MBX_OK, or an API status with err
   set. */
mbx_status mbxH_wpool_take(mbxH_wpool *pool, uint64_t memory_limit, int one_tenant,
                           const unsigned char *fp, size_t fp_len, mbxH_wproc *p, int *reused,
                           mbx_error *err);
/* As root, each zygote's workers and init run as a uid of its own taken from uids (the
   runtime's exec uid range, capabilities/exec_uid.h) while it lives; NULL: nobody. */
struct mbxC_uid_pool;
void mbxH_wpool_set_uids(mbxH_wpool *pool, struct mbxC_uid_pool *uids);
/* Re-execute the zygote after it forked every workers (0: only after a crash). */
void mbxH_wpool_set_reexec(mbxH_wpool *pool, unsigned every);
/* A one-tenant runtime's freed sandbox: its healthy worker is kept for the next sandbox of the
   same memory limit; when the pool keeps enough already, it is ended. */
void mbxH_wpool_keep(mbxH_wpool *pool, mbxH_wproc *p);
/* The worker of a sandbox is done with: killed, and reaped by the zygote. With want_status,
   wait for its status (how it ended: a wait status, or -1 when unknown); else reap it later
   (-1). crashed: count it towards the crash penalty and re-execute the zygote. prime (NULL:
   none) is a CREATE of the freed sandbox's policy for the worker that replaces it. */
int mbxH_wpool_release(mbxH_wpool *pool, mbxH_wproc *p, int want_status, int crashed,
                       const mbxH_prime_offer *prime);

#endif
