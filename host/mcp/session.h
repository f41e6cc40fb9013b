/* host/mcp/session.h -- the session table of `moonbox mcp` (fixed size, idle expiry and
   hibernation); no locking of its own: the caller holds the lock that guards the table. */
#ifndef MBX_HOST_MCP_SESSION_H
#define MBX_HOST_MCP_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "moonbox.h"

/* Open sessions at once, and how long an unused one lives. */
#define MBXH_MCP_MAX_SESSIONS 32
#define MBXH_MCP_SESSION_IDLE_MS ((uint64_t)10 * 60 * 1000)
#define MBXH_MCP_SESSION_ID_MAX 64

typedef struct mbxH_mcp_session {
  char id[MBXH_MCP_SESSION_ID_MAX + 1]; /* "" = a free slot */
  uint64_t owner;                       /* the client whose names these are (0: stdio) */
  int dead;                             /* its client is gone: dropped once not busy */
  mbx_sandbox *sandbox;                 /* NULL while the opening call creates it */
  int busy;                             /* a call runs in it (or resets it) */
  uint64_t last_used_ms;
} mbxH_mcp_session;

typedef struct mbxH_mcp_sessions {
  mbxH_mcp_session slot[MBXH_MCP_MAX_SESSIONS];
} mbxH_mcp_sessions;

enum {
  MBXH_SESSION_FOUND = 0,
  MBXH_SESSION_CREATED = 1,
  MBXH_SESSION_BUSY = -1,
  MBXH_SESSION_FULL = -2
};

/* 1 if id (len bytes) is 1..64 of [A-Za-z0-9_.-], else 0. */
int mbxH_mcp_session_id_ok(const char *id, size_t len);
/* The session named id of the client owner (names are scoped per client: two HTTP clients
   never see each other's), or NULL. */
mbxH_mcp_session *mbxH_mcp_session_find(mbxH_mcp_sessions *t, uint64_t owner, const char *id);
/* Marks owner's session id busy, taking a free slot when there is none and owner holds fewer
   than max_per_owner (sandbox NULL: the caller creates it). MBXH_SESSION_FOUND / _CREATED
   with *out set, _BUSY, or _FULL. */
int mbxH_mcp_session_acquire(mbxH_mcp_sessions *t, uint64_t owner, const char *id,
                             size_t max_per_owner, uint64_t now_ms, mbxH_mcp_session **out);
/* The call is done with it. */
void mbxH_mcp_session_release(mbxH_mcp_session *s, uint64_t now_ms);
/* Frees the slot; returns its sandbox, which the caller frees outside the lock. */
mbx_sandbox *mbxH_mcp_session_drop(mbxH_mcp_session *s);
/* The client owner is gone: its sessions that are not busy are dropped, their sandboxes put
   in out (at most max; returns how many), the busy ones marked dead for the expiry. */
size_t mbxH_mcp_session_drop_owner(mbxH_mcp_sessions *t, uint64_t owner, mbx_sandbox **out,
                                   size_t max);
/* Drops the sessions idle for more than idle_ms or dead (never a busy one): their sandboxes go
   to out (at most max); returns how many. */
size_t mbxH_mcp_session_expire(mbxH_mcp_sessions *t, uint64_t now_ms, uint64_t idle_ms,
                               mbx_sandbox **out, size_t max);
size_t mbxH_mcp_session_count(const mbxH_mcp_sessions *t);
size_t mbxH_mcp_session_count_owner(const mbxH_mcp_sessions *t, uint64_t owner);
/* Hibernates (mbx_sandbox_hibernate) the sessions idle for idle_ms or more that are awake and
   not busy: a session with a call running -- also one waiting on an upstream inside that
   call -- is never touched. Returns how many it hibernated; *unsupported is set when the
   library cannot hibernate them (MBX_UNSUPPORTED: a build without the arena). */
size_t mbxH_mcp_session_hibernate(mbxH_mcp_sessions *t, uint64_t now_ms, uint64_t idle_ms,
                                  int *unsupported);

#endif
