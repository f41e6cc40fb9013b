/* host/backend/shared.c -- the host's half of a sandbox that every backend builds the same way. */
#include "host/backend/shared.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "capabilities/policy.h"
#include "common/error.h"
#include "vm/arena.h"

/* Numbers a thread takes from a runtime's counter at once: one shared write per this many
   sandboxes. Numbers left in a batch when the thread moves to another runtime are skipped. */
#define SANDBOX_NUMBER_BATCH 64

/* The batch is named by the runtime's id, never its address (a freed runtime's address may
   be a new runtime's). */
static _Thread_local struct {
  uint64_t runtime_id;
  uint64_t next, end;
} number_batch;

uint64_t mbxH_sandbox_number(const mbxH_services *svc) {
  if (number_batch.runtime_id != svc->runtime_id || number_batch.next == number_batch.end) {
    number_batch.next = atomic_fetch_add_explicit(svc->sandboxes_created, SANDBOX_NUMBER_BATCH,
                                                  memory_order_relaxed);
    number_batch.end = number_batch.next + SANDBOX_NUMBER_BATCH;
    number_batch.runtime_id = svc->runtime_id;
  }
  return number_batch.next++;
}

uint64_t mbxH_shared_address_key(const mbxH_services *svc) {
  return svc->address_key ^ mbxH_sandbox_number(svc);
}

mbx_status mbxH_shared_no_memory(mbxC_replay_log *replay, mbx_error *err) {
  if (replay) mbxC_replay_free(replay);
  mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
  return MBX_NO_MEMORY;
}

mbx_status mbxH_shared_port(const mbxH_services *svc, const mbx_policy *p,
                            const mbxC_snap_header *snap, mbxC_replay_log *replay,
                            mbxC_port_local *port, mbxC_port_record *record, int *recording,
                            mbx_error *err) {
  int made_port = mbxC_port_local_init(port, p);
  if (made_port == MBXC_PORT_LOCAL_FS_FAILED) {
    if (replay) mbxC_replay_free(replay);
    /* A mounted directory went away (or lost its permissions) since the policy took it. */
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_new: %s", port->fs_error.message);
    return MBX_INVALID_ARGUMENT;
  }
  if (made_port != 0) return mbxH_shared_no_memory(replay, err);
  /* Seeds from the runtime's secret: no system call per sandbox. */
  port->seeds = svc->seeds;
  /* Programs run from the host, in the runtime's exec backend, with port_local's checks
     (a worker only forwards the request). */
  mbxC_port_local_set_exec(port, svc->exec);
  if (snap) {
    mbxC_port_record_init(record, &port->port, mbxC_snap_chain0(snap));
    *recording = 1;
    if (replay) mbxC_port_record_replay_begin(record, replay);
    mbxC_vfs_tap tap = mbxC_port_record_fs_tap(record);
    mbxC_port_local_set_fs_tap(port, &tap);
  }
  if (replay) mbxC_replay_free(replay); /* taken over above, or of no use */
  return MBX_OK;
}

void mbxH_shared_config(const mbxH_services *svc, const mbx_policy *p, mbxV_config *cfg) {
  *cfg = (mbxV_config){.memory_limit = (size_t)p->memory,
                       .instruction_limit = p->instructions,
                       .time_limit_ms = p->time_ms,
                       .output_limit = (size_t)p->output,
                       .source_limit = (size_t)p->source,
                       .result_limit = (size_t)p->result,
                       .address_key = mbxH_shared_address_key(svc)};
}

mbx_status mbxH_shared_cap_refusal(const mbxH_services *svc, mbx_error *err) {
  unsigned cap;
  size_t reserve_cap;
  mbxV_pool_get_caps(svc->slots, &cap, &reserve_cap);
  mbxU_error_set(err, MBX_NO_MEMORY,
                 "mbx_sandbox_new: %llu sandboxes are live in this runtime, its cap "
                 "MBX_CAP_SANDBOXES; free some, or raise the cap with mbx_runtime_set_cap",
                 (unsigned long long)cap);
  return MBX_NO_MEMORY;
}

void mbxH_shared_chunk_name(const char *given, char *name) {
  if (given == NULL || *given == '\0') given = "input";
  size_t given_len = strlen(given), room = MBXH_CHUNK_NAME_SIZE - 2;
  if (given_len > room) {
    snprintf(name, MBXH_CHUNK_NAME_SIZE, "=...%s", given + given_len - (room - 3));
  } else {
    name[0] = '='; /* the common case without snprintf's format machinery */
    memcpy(name + 1, given, given_len + 1);
  }
}

mbx_status mbxH_shared_set_stdin(mbxC_port_local *port, const char *data, size_t len, int fd,
                                 mbx_error *err) {
  if (fd >= 0) {
    mbxC_port_local_set_stdin_fd(port, fd);
    return MBX_OK;
  }
  if (mbxC_port_local_set_stdin(port, data, len) == 0) return MBX_OK;
  mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_set_stdin: out of host memory for %zu bytes",
                 len);
  return MBX_NO_MEMORY;
}

mbx_status mbxH_shared_checkpoint_files(mbxC_port_local *port, mbxC_vfs_mark **files,
                                        mbx_error *err) {
  if (mbxC_port_local_fs_mark(port, files) == 0) return MBX_OK;
  mbxU_error_set(err, MBX_NO_MEMORY,
                 "mbx_sandbox_checkpoint: out of host memory for the "
                 "copy of /tmp; the previous checkpoint (if any) is kept");
  return MBX_NO_MEMORY;
}

void mbxH_shared_checkpoint_keep(mbxC_port_local *port, mbxC_port_record *record,
                                 mbxC_vfs_mark *files, mbxH_port_mark *mark) {
  mbxC_port_local_fs_keep(port, files);
  mark->draws = mbxC_port_local_position(port);
  mark->stdin_pos = port->stdin_source.pos;
  mark->log = mbxC_port_record_mark(record);
}

mbx_status mbxH_shared_rewind(mbxC_port_local *port, mbxC_port_record *record, int recording,
                              const mbxH_port_mark *mark, mbx_error *err) {
  mbxC_port_local_seek(port, mark->draws);
  /* The bytes may have been replaced since (mbx_sandbox_set_stdin): never past their end. */
  port->stdin_source.pos = mark->stdin_pos <= port->stdin_source.len ? mark->stdin_pos : 0;
  if (mbxC_port_local_fs_rewind(port) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_rewind: the state is rewound, but the "
                   "memory files could not be (out of host memory): /tmp "
                   "may be empty");
    return MBX_NO_MEMORY;
  }
  /* The log goes back with the state. Across a reset the records of the checkpoint's session
     are gone: the log breaks, and the sandbox cannot be snapshotted until its next reset
     (port_record.h). */
  if (recording) mbxC_port_record_rewind(record, mark->log);
  return MBX_OK;
}

mbx_status mbxH_shared_no_arena(const char *fn, mbx_error *err) {
  mbxU_error_set(err, MBX_UNSUPPORTED,
                 "%s: not available in this build (MBX_ARENA_MALLOC: the "
                 "guest heap is not one arena)",
                 fn);
  return MBX_UNSUPPORTED;
}
