/* host/worker/zygote.h -- moonbox-worker's two roles: the zygote (zygote.c) and one jailed
   worker serving one sandbox (main.c), and what each uses of the other. */
#ifndef MBX_HOST_WORKER_ZYGOTE_H
#define MBX_HOST_WORKER_ZYGOTE_H

#include <stddef.h>

#include "host/backend/worker_proto.h"

/* `moonbox-worker --zygote`: fork workers on the parent's SPAWN and REAP frames (its control
   socket at fd 3, its mailbox at fd 4) until the parent goes. The process's exit code. */
int mbxH_zygote(void);

/* ---- the worker's side (main.c), for the zygote ---- */

/* Before the first fork: the work every worker would repeat (a template state), done once in
   the zygote; failures only make workers slower. */
void mbxH_worker_prewarm(void);
/* In a freshly forked, partly jailed child: complete the jail and serve one sandbox over fd
   until the parent closes it (the process then exits). */
void mbxH_worker_serve(int fd);
/* A frame on a blocking socket: sent whole (0, or -1), or received exactly, with nothing read
   past its end (the frame's type, or -1 when the socket closed or the header is malformed). */
int mbxH_worker_send_frame(int fd, mbxH_wp_writer *w);
int mbxH_worker_recv_frame(int fd, unsigned char **buf, size_t *cap, size_t *len);

#endif
