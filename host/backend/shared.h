/* host/backend/shared.h -- the host's half of a sandbox that every backend builds the same way. */
#ifndef MBX_HOST_BACKEND_SHARED_H
#define MBX_HOST_BACKEND_SHARED_H

/*
** Whatever runs the vm, the host keeps the sandbox's port (capabilities/port_local.c: its
** files, host functions, natives and programs, with their checks), the record/replay layer
** over it for deterministic policies, and the vm config the policy implies. The in-process
** backend (inproc.c) hands that port to the vm on the calling thread; the worker backend
** (worker.c) serves it to a jailed process. Both build it here, so a sandbox is the same
** sandbox whichever backend runs it: a change to what the host's half holds is made once.
*/

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "capabilities/port_local.h"
#include "capabilities/port_record.h"
#include "capabilities/replay.h"
#include "host/backend/backend.h"
#include "include/moonbox.h"
#include "vm/vm.h"

/* A number no other sandbox of the runtime has had. Each thread takes them in batches from
   the runtime's counter, so a creation usually writes nothing shared (the counter sits on a
   cache line every creating thread would otherwise bounce). */
uint64_t mbxH_sandbox_number(const mbxH_services *svc);
/* The address key of a new or reset sandbox: the runtime's secret with a fresh sandbox number,
   so the hashes shown in place of addresses match across no two sandboxes or resets. */
uint64_t mbxH_shared_address_key(const mbxH_services *svc);

/* A backend's sandbox could not be allocated: replay (NULL: none) is freed, err says so, and
   MBX_NO_MEMORY is returned. */
mbx_status mbxH_shared_no_memory(mbxC_replay_log *replay, mbx_error *err);
/* The host's half into a backend's zeroed fields: the port from p (its seeds the runtime's,
   its programs run in the runtime's exec backend) and, with snap (deterministic policies),
   the record layer over it (*recording = 1), its log chained from snap, replaying replay's
   answers (NULL: none) and tapping the port's filesystem. replay is taken over in every case.
   MBX_OK; or MBX_INVALID_ARGUMENT (a mounted directory cannot be opened) or MBX_NO_MEMORY,
   with err set and nothing to release in port or record. */
mbx_status mbxH_shared_port(const mbxH_services *svc, const mbx_policy *p,
                            const mbxC_snap_header *snap, mbxC_replay_log *replay,
                            mbxC_port_local *port, mbxC_port_record *record, int *recording,
                            mbx_error *err);
/* The vm config p implies, with a fresh address key (no shape key: a backend's own). */
void mbxH_shared_config(const mbxH_services *svc, const mbx_policy *p, mbxV_config *cfg);
/* The refusal when the runtime's MBX_CAP_SANDBOXES sandboxes are live: MBX_NO_MEMORY. */
mbx_status mbxH_shared_cap_refusal(const mbxH_services *svc, mbx_error *err);

/* Bytes a chunk name takes, NUL included: what Lua keeps of one. */
#define MBXH_CHUNK_NAME_SIZE LUA_IDSIZE
/* The chunk name of a run: "=" and the name given (NULL or "": "input"); a name too long
   keeps its end, where the file name is ("=...dir/script.lua"). name holds
   MBXH_CHUNK_NAME_SIZE bytes. */
void mbxH_shared_chunk_name(const char *given, char *name);

/* Where the port stood at a checkpoint (what the vm state's copy does not hold): a rewind
   puts it back there. */
typedef struct mbxH_port_mark {
  uint64_t draws;       /* port seeds drawn: math.randomseed() continues from here */
  size_t stdin_pos;     /* how far io.stdin was read */
  mbxC_record_mark log; /* where the log stood */
} mbxH_port_mark;

/* A checkpoint's copy of the memory files (/tmp) into *files, made before the state's copy:
   MBX_OK, or MBX_NO_MEMORY with err set (the previous checkpoint, if any, is kept). */
mbx_status mbxH_shared_checkpoint_files(mbxC_port_local *port, mbxC_vfs_mark **files,
                                        mbx_error *err);
/* The state's copy is made too: the port keeps files (taken over) and *mark where it stands. */
void mbxH_shared_checkpoint_keep(mbxC_port_local *port, mbxC_port_record *record,
                                 mbxC_vfs_mark *files, mbxH_port_mark *mark);
/* The state is rewound: the port goes back to mark (seed draws, io.stdin, the memory files,
   the log when recording). MBX_OK, or MBX_NO_MEMORY with err set when the memory files could
   not be rewound (/tmp may be empty). */
mbx_status mbxH_shared_rewind(mbxC_port_local *port, mbxC_port_record *record, int recording,
                              const mbxH_port_mark *mark, mbx_error *err);
/* fn ("mbx_sandbox_checkpoint", "mbx_sandbox_rewind") in a build whose guest heap is not one
   arena (MBX_ARENA_MALLOC): MBX_UNSUPPORTED, with err saying so. */
mbx_status mbxH_shared_no_arena(const char *fn, mbx_error *err);

/* mbx_sandbox_set_stdin and _set_stdin_fd: the bytes io.stdin reads, copied into the port,
   or (fd >= 0) the descriptor the port reads as the guest asks. */
mbx_status mbxH_shared_set_stdin(mbxC_port_local *port, const char *data, size_t len, int fd,
                                 mbx_error *err);

#endif
