/* capabilities/port_record.h -- record/replay as a layer over any port (snapshots). */
#ifndef MBX_CAPABILITIES_PORT_RECORD_H
#define MBX_CAPABILITIES_PORT_RECORD_H

/*
** A port that wraps another one (the in-process port today, a worker's later). Live, it
** forwards every operation to the inner port and appends the answer to the replay log
** (capabilities/replay.h). Replaying (mbx_sandbox_restore), it checks each request against its
** record and answers by the operation's replay class:
**   - answers from outside the sandbox (clocks, random seeds, host and native calls, exec
**     results, and later host files) come from the log: the inner port is not asked, except that a
**     random seed is still drawn from it so its sequence stays where the original's was;
**   - answers the policy decides (the virtual environment) and, later, effects inside the
**     sandbox (memory and overlay files) are re-executed on the inner port and the recorded
**     answer is checked against the new one.
** So a capability added later is recorded by adding its record type and its class here, not
** by editing every operation. The session records (run, resume, outcome) are written by the
** host through the functions below, with the same live/replay split.
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"
#include "capabilities/replay.h"
#include "capabilities/vfs.h"

typedef struct mbxC_port_record {
  mbxC_port port;         /* the outer table; port.ud points at this struct: do not move it */
  const mbxC_port *inner; /* borrowed; outlives this layer */
  int replaying;
  size_t cursor; /* replaying: the next record to read */
  uint64_t chain0;
  mbxC_replay_log log;
  char diverged[320]; /* replaying: the first divergence, naming the record; "" while none */
  /* Live: bytes of host files and listings the guest read (MBXC_SNAP_MAX_HOST_BYTES), and
     the first rw mount it wrote to ("" while none): both refuse a snapshot. */
  uint64_t host_bytes;
  char rw_written[256];
  uint64_t session; /* restarts so far: a mark of an earlier session cannot be rewound to */
} mbxC_port_record;

/* Wrap inner and start a log whose chain begins at chain0. */
void mbxC_port_record_init(mbxC_port_record *r, const mbxC_port *inner, uint64_t chain0);
/* Release the log. Never fails; a zeroed r is fine. */
void mbxC_port_record_free(mbxC_port_record *r);
/* Drop every record and start again at chain0 (a reset begins a new session). */
void mbxC_port_record_restart(mbxC_port_record *r);

/* Replay mode: answers come from log (taken over, emptied); recording goes on after its
   records once mbxC_port_record_replay_end is called. */
void mbxC_port_record_replay_begin(mbxC_port_record *r, mbxC_replay_log *log);
/* Back to live answers. Returns 0, or -1 with r->diverged set (also when records were left
   over). */
int mbxC_port_record_replay_end(mbxC_port_record *r);
/* Note a divergence the host found (the first one is kept). */
void mbxC_port_record_diverge(mbxC_port_record *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Where the log stands, for checkpoint/rewind: a rewind drops the records made since. A
   mark taken before a restart (a reset since the checkpoint) names records that are gone:
   rewinding to it breaks the log instead (no snapshot until the next restart). */
typedef struct mbxC_record_mark {
  size_t count;
  int broken;
  uint64_t host_bytes;
  uint64_t session;
} mbxC_record_mark;
mbxC_record_mark mbxC_port_record_mark(const mbxC_port_record *r);
void mbxC_port_record_rewind(mbxC_port_record *r, mbxC_record_mark m);
/* The log can no longer make a faithful snapshot (rewound across a reset). */
void mbxC_port_record_break(mbxC_port_record *r);

/* 1 when the log can no longer make a faithful snapshot (a bound, host memory, a rewind
   across a reset). */
int mbxC_port_record_broken(const mbxC_port_record *r);

/* The filesystem view's tap (capabilities/vfs.h) over this layer: host mounts' answers go to
   the log live and come from it replaying; a write to a rw mount is noted live (r->rw_written)
   and refused replaying. Set it on the view with mbxC_vfs_set_tap (port_local does). */
mbxC_vfs_tap mbxC_port_record_fs_tap(mbxC_port_record *r);
/* The snapshot blob of header h and the log (mbxC_snap_encode). Returns 0, or -1 when out of
   host memory. */
int mbxC_port_record_snapshot(const mbxC_port_record *r, const mbxC_snap_header *h, void **bytes,
                              size_t *len);
/* Replaying: the record at the cursor, for the host to re-issue when it is a session record
   (run, resume). Returns 0 when the log is exhausted or the replay has diverged; *at gets the
   cursor. */
int mbxC_port_record_pending(const mbxC_port_record *r, mbxC_record *rec, size_t *at);
/* Replaying: where the cursor stands (a session call that did not move it failed). */
size_t mbxC_port_record_cursor(const mbxC_port_record *r);
/* "" while the replay follows its log, else the first divergence. */
const char *mbxC_port_record_divergence(const mbxC_port_record *r);

/* Session records: appended when live; when replaying, checked against the record at the
   cursor (a mismatch sets r->diverged). */
void mbxC_port_record_run(mbxC_port_record *r, const char *chunk_name, const char *code,
                          size_t code_len, const char *inputs, size_t inputs_len);
void mbxC_port_record_resume(mbxC_port_record *r, int as_error, const char *value, size_t len);
void mbxC_port_record_outcome(mbxC_port_record *r, uint32_t status, uint64_t hash,
                              uint64_t host_calls);

#endif
