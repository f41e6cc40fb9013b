/* host/mcp/http.h -- `moonbox mcp --http HOST:PORT`: the MCP Streamable HTTP transport
   (2025-11-25) on libmicrohttpd, in front of the one dispatch of server.c (docs/mcp.md). */
#ifndef MBX_HOST_MCP_HTTP_H
#define MBX_HOST_MCP_HTTP_H

#include <stddef.h>
#include <stdint.h>

/* The listener's limits (docs/SECURITY-MODEL.md: the HTTP listener). */
#define MBXH_HTTP_MAX_CONNECTIONS 64              /* open at once, all clients */
#define MBXH_HTTP_MAX_PER_IP 16                   /* open at once from one address */
#define MBXH_HTTP_IDLE_TIMEOUT_S 30               /* a connection silent this long is closed */
#define MBXH_HTTP_HEADER_MEMORY ((size_t)32768)   /* request line + headers of one connection */
#define MBXH_HTTP_MAX_BODY ((size_t)32 << 20)     /* one POST's body */
#define MBXH_HTTP_BODY_BUDGET ((size_t)256 << 20) /* bodies being received, all connections */
#define MBXH_HTTP_BODY_MS ((uint64_t)120 * 1000)  /* receiving one body, start to end */
#define MBXH_HTTP_MAX_CLIENTS 64                  /* MCP sessions (Mcp-Session-Id) at once */
#define MBXH_HTTP_CLIENT_CALLS 4                  /* one client's tools/call in flight */
#define MBXH_HTTP_CLIENT_SESSIONS 8               /* one client's session names open */
/* --http-session-prefix: the longest name put in front of a session id ("NAME-" + 64 hex). */
#define MBXH_HTTP_SESSION_PREFIX_MAX 16

typedef struct mbxH_mcp_http_config {
  const char *listen;     /* HOST:PORT (HOST an address, [v6] or localhost) */
  const char *token_file; /* its first line is the bearer token; NULL: none */
  const char *cert_file;  /* PEM certificate and key: HTTPS; NULL: plain HTTP */
  const char *key_file;
  const char *allow_origin; /* one more Origin accepted besides loopback ones; NULL: none */
  int behind_proxy;         /* off loopback without TLS: a TLS proxy is in front */
  /* Every session id minted starts with this and '-' (a proxy routes on it: docs/cli.md,
     Scale-out); NULL: none. At most MBXH_HTTP_SESSION_PREFIX_MAX letters, digits or '-' (the
     CLI's parse checks the characters; the length is checked again here). */
  const char *session_prefix;
} mbxH_mcp_http_config;

typedef struct mbxH_mcp_server mbxH_mcp_server;

/* Serves the initialized server s on cfg's address until SIGINT or SIGTERM, then waits for the
   calls in flight (the caller then finishes s). Exit code (2: a bad configuration). */
int mbxH_mcp_http_serve(mbxH_mcp_server *s, const mbxH_mcp_http_config *cfg);

#endif
