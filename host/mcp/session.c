/* host/mcp/session.c -- the MCP server's session table: a fixed number of slots, so that a
   client opening thousands of sessions meets a clear cap instead of exhausting memory; idle
   ones expire, and before that hibernate (--hibernate-after). */
#include "host/mcp/session.h"

#include <string.h>

int mbxH_mcp_session_id_ok(const char *id, size_t len) {
  if (len == 0 || len > MBXH_MCP_SESSION_ID_MAX) return 0;
  for (size_t i = 0; i < len; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

mbxH_mcp_session *mbxH_mcp_session_find(mbxH_mcp_sessions *t, uint64_t owner, const char *id) {
  for (size_t i = 0; i < MBXH_MCP_MAX_SESSIONS; i++)
    if (t->slot[i].id[0] != '\0' && !t->slot[i].dead && t->slot[i].owner == owner &&
        strcmp(t->slot[i].id, id) == 0)
      return &t->slot[i];
  return NULL;
}

int mbxH_mcp_session_acquire(mbxH_mcp_sessions *t, uint64_t owner, const char *id,
                             size_t max_per_owner, uint64_t now_ms, mbxH_mcp_session **out) {
  mbxH_mcp_session *s = mbxH_mcp_session_find(t, owner, id);
  *out = NULL;
  if (s != NULL) {
    if (s->busy) return MBXH_SESSION_BUSY;
    s->busy = 1;
    s->last_used_ms = now_ms;
    *out = s;
    return MBXH_SESSION_FOUND;
  }
  if (mbxH_mcp_session_count_owner(t, owner) >= max_per_owner) return MBXH_SESSION_FULL;
  for (size_t i = 0; i < MBXH_MCP_MAX_SESSIONS; i++) {
    s = &t->slot[i];
    if (s->id[0] != '\0') continue;
    size_t len = strlen(id);
    if (len > MBXH_MCP_SESSION_ID_MAX) return MBXH_SESSION_FULL; /* checked before; defensive */
    memcpy(s->id, id, len + 1);
    s->owner = owner;
    s->dead = 0;
    s->sandbox = NULL;
    s->busy = 1;
    s->last_used_ms = now_ms;
    *out = s;
    return MBXH_SESSION_CREATED;
  }
  return MBXH_SESSION_FULL;
}

void mbxH_mcp_session_release(mbxH_mcp_session *s, uint64_t now_ms) {
  s->busy = 0;
  s->last_used_ms = now_ms;
}

mbx_sandbox *mbxH_mcp_session_drop(mbxH_mcp_session *s) {
  mbx_sandbox *sb = s->sandbox;
  memset(s, 0, sizeof *s);
  return sb;
}

size_t mbxH_mcp_session_expire(mbxH_mcp_sessions *t, uint64_t now_ms, uint64_t idle_ms,
                               mbx_sandbox **out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < MBXH_MCP_MAX_SESSIONS && n < max; i++) {
    mbxH_mcp_session *s = &t->slot[i];
    if (s->id[0] == '\0' || s->busy || (!s->dead && now_ms - s->last_used_ms <= idle_ms)) continue;
    out[n++] = mbxH_mcp_session_drop(s);
  }
  return n;
}

size_t mbxH_mcp_session_count(const mbxH_mcp_sessions *t) {
  size_t n = 0;
  for (size_t i = 0; i < MBXH_MCP_MAX_SESSIONS; i++)
    if (t->slot[i].id[0] != '\0') n++;
  return n;
}

size_t mbxH_mcp_session_count_owner(const mbxH_mcp_sessions *t, uint64_t owner) {
  size_t n = 0;
  for (size_t i = 0; i < MBXH_MCP_MAX_SESSIONS; i++)
    if (t->slot[i].id[0] != '\0' && !t->slot[i].dead && t->slot[i].owner == owner) n++;
  return n;
}

size_t mbxH_mcp_session_drop_owner(mbxH_mcp_sessions *t, uint64_t owner, mbx_sandbox **out,
                                   size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < MBXH_MCP_MAX_SESSIONS; i++) {
    mbxH_mcp_session *s = &t->slot[i];
    if (s->id[0] == '\0' || s->owner != owner) continue;
    if (s->busy || n >= max)
      s->dead = 1; /* the call in it ends, then the monitor's expiry drops it */
    else
      out[n++] = mbxH_mcp_session_drop(s);
  }
  return n;
}

size_t mbxH_mcp_session_hibernate(mbxH_mcp_sessions *t, uint64_t now_ms, uint64_t idle_ms,
                                  int *unsupported) {
  size_t n = 0;
  for (size_t i = 0; i < MBXH_MCP_MAX_SESSIONS; i++) {
    mbxH_mcp_session *s = &t->slot[i];
    if (s->id[0] == '\0' || s->busy || s->sandbox == NULL || now_ms - s->last_used_ms < idle_ms ||
        mbx_sandbox_hibernated(s->sandbox))
      continue;
    /* MBX_NO_MEMORY (no host memory for the image) leaves it awake: tried again later. */
    mbx_status st = mbx_sandbox_hibernate(s->sandbox, NULL);
    if (st == MBX_OK) n++;
    if (st == MBX_UNSUPPORTED) {
      *unsupported = 1;
      break;
    }
  }
  return n;
}
