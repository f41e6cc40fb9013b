/* host/mcp/upstream_process.h -- the process of a stdio upstream (upstream.c): started without
   a shell in its own process group, its stdin written without ever blocking past a limit, its
   stderr relayed line by line onto ours. Plain data in, no upstream state. */
#ifndef MBX_HOST_MCP_UPSTREAM_PROCESS_H
#define MBX_HOST_MCP_UPSTREAM_PROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* An upstream's stderr line is cut at this many bytes when relayed. */
#define MBXH_STDERR_LINE_MAX 2048

/* All of p to fd (non-blocking), or -1 when it is gone or has not taken the bytes within
   limit_ms: an upstream that stops reading its stdin cannot hold a writer past its limit. */
int mbxH_process_write_all(int fd, const char *p, size_t n, uint64_t limit_ms);

/* Starts argv (found on PATH; no shell) with the server's environment plus env (NAME=VALUE
   entries replacing the server's), in cwd (NULL: ours), in a process group of its own, SIGPIPE
   at its default. 0 with *pid and our ends of its stdin (*to), stdout (*from) and stderr
   (*errs), or -1 with msg naming the upstream (name). */
int mbxH_process_spawn(const char *name, char *const argv[], char *const env[], const char *cwd,
                       pid_t *pid, int *to, int *from, int *errs, char *msg, size_t msg_size);

/* What the stderr relay thread reads (malloc'd; the thread frees it and closes fd). */
typedef struct mbxH_stderr_relay {
  int fd;
  char name[64]; /* the upstream's, for the prefix "moonbox mcp: upstream NAME: " */
} mbxH_stderr_relay;

/* The thread body: arg's lines on our stderr, each prefixed with the upstream's name, written
   only when stderr takes them now (a client that never reads our stderr stalls nothing: lines
   are dropped and counted). */
void *mbxH_process_stderr_thread(void *arg);

#endif
