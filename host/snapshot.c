/* host/snapshot.c -- portable snapshots: a deterministic sandbox's replay log as a blob, and
   a restore that replays it through the public run path (DESIGN decision 9). Uses only the
   record/replay layer over the sandbox's port (capabilities/port_record.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <xxhash.h>

#include "capabilities/policy.h"
#include "capabilities/port_record.h"
#include "capabilities/replay.h"
#include "host/sandbox.h"
#include "include/moonbox.h"
#include "common/error.h"

MBX_API mbx_status mbx_sandbox_snapshot(mbx_sandbox *sb, void **bytes, size_t *len,
                                        mbx_error *err) {
  if (bytes) *bytes = NULL;
  if (len) *len = 0;
  if (sb == NULL || bytes == NULL || len == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_snapshot: the sandbox, bytes and len must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (!mbxH_sandbox_claim(sb, "mbx_sandbox_snapshot", err)) return MBX_SANDBOX_BUSY;
  mbx_status s = MBX_OK;
  mbxC_port_record *rec = sb->backend->recorder(sb->impl);
  if (rec == NULL) {
    s = MBX_INVALID_ARGUMENT;
    mbxU_error_set(err, s,
                   "mbx_sandbox_snapshot: the sandbox's policy is not deterministic; "
                   "create the sandbox from a policy with mbx_policy_set_deterministic "
                   "to snapshot it");
  } else if (rec->rw_written[0]) {
    /* A write to a rw mount reached the host: a replay cannot make it again blindly (the
       host may hold other files by then), and re-applying it would write the host twice. */
    s = MBX_UNSUPPORTED;
    mbxU_error_set(err, s,
                   "mbx_sandbox_snapshot: the guest wrote to the rw mount %s; writes to rw "
                   "mounts reach the host and are not replayed, so such a sandbox cannot be "
                   "snapshotted (mount it as overlay to snapshot edits; mbx_sandbox_reset "
                   "starts a new log)",
                   rec->rw_written);
  } else if (rec->host_bytes > MBXC_SNAP_MAX_HOST_BYTES) {
    s = MBX_UNSUPPORTED;
    mbxU_error_set(err, s,
                   "mbx_sandbox_snapshot: the guest read %llu bytes of host files and "
                   "directory listings, past the snapshot cap of %llu bytes (a restore answers "
                   "every host read from the snapshot); mbx_sandbox_reset starts a new log",
                   (unsigned long long)rec->host_bytes,
                   (unsigned long long)MBXC_SNAP_MAX_HOST_BYTES);
  } else if (sb->poisoned) {
    s = MBX_SANDBOX_POISONED;
    mbxU_error_set(err, s,
                   "mbx_sandbox_snapshot: the sandbox ended a run with %s; a poisoned "
                   "sandbox cannot be snapshotted",
                   mbx_status_key(sb->poisoned_by));
  } else if (mbxC_port_record_broken(rec)) {
    s = MBX_UNSUPPORTED;
    mbxU_error_set(err, s,
                   "mbx_sandbox_snapshot: the sandbox's replay log is incomplete (it "
                   "outgrew %zu MiB, the host ran out of memory, or the sandbox was "
                   "rewound across a reset); mbx_sandbox_reset starts a new one",
                   MBXC_SNAP_MAX_LOG >> 20);
  } else {
    mbxC_snap_header h = sb->snap;
    h.paused = (uint8_t)(mbx_sandbox_paused(sb) != 0);
    if (mbxC_port_record_snapshot(rec, &h, bytes, len) != 0) {
      s = MBX_NO_MEMORY;
      mbxU_error_set(err, s, "mbx_sandbox_snapshot: out of host memory for the blob");
    }
  }
  mbxH_sandbox_release(sb);
  return s;
}

/* Replay every session record of the log through the public run path. Returns 0, or -1 with
   the divergence recorded in pl. */
static int replay_session(mbx_sandbox *sb, mbxC_port_record *pl) {
  mbxC_record r;
  size_t at;
  while (mbxC_port_record_pending(pl, &r, &at)) {
    mbxC_reader rd = mbxC_reader_of(&r);
    mbx_result *res = NULL;
    mbx_error e = {0};
    mbx_status s;
    size_t name_len, code_len, inputs_len, value_len;
    if (r.type == MBXC_REC_RUN) {
      const char *name = mbxC_read_str(&rd, &name_len);
      const char *code = mbxC_read_str(&rd, &code_len);
      int has_inputs = mbxC_read_u8(&rd);
      const char *inputs = mbxC_read_str(&rd, &inputs_len);
      /* The chunk name as a C string (the record holds at most LUA_IDSIZE-ish bytes in
         practice, but any length is accepted: only its end is kept). */
      char *name_z = malloc(name_len + 1);
      if (name_z == NULL) {
        mbxC_port_record_diverge(pl, "record %zu: out of host memory", at);
        break;
      }
      memcpy(name_z, name, name_len);
      name_z[name_len] = '\0';
      if (strlen(name_z) != name_len) {
        free(name_z);
        mbxC_port_record_diverge(pl, "record %zu: the recorded chunk name holds a NUL byte", at);
        break;
      }
      s = mbx_run_named(sb, code, code_len, name_z, has_inputs ? inputs : NULL, inputs_len, &res,
                        &e);
      free(name_z);
    } else if (r.type == MBXC_REC_RESUME || r.type == MBXC_REC_RESUME_ERROR) {
      const char *value = mbxC_read_str(&rd, &value_len);
      s = r.type == MBXC_REC_RESUME ? mbx_resume(sb, value_len ? value : NULL, value_len, &res, &e)
                                    : mbx_resume_error(sb, value, value_len, &res, &e);
    } else {
      mbxC_port_record_diverge(pl,
                               "record %zu: the log has %s where a run or a resume was expected",
                               at, mbxC_rec_type_name(r.type));
      break;
    }
    if (s < MBX_API_ERROR_BASE) mbx_result_free(res);
    if (!mbxC_port_record_divergence(pl)[0] && mbxC_port_record_cursor(pl) == at)
      mbxC_port_record_diverge(pl,
                               "record %zu: the replay could not make this "
                               "%s: %s",
                               at, mbxC_rec_type_name(r.type), e.message);
  }
  return mbxC_port_record_divergence(pl)[0] ? -1 : 0;
}

/* The snapshot's mounts against the policy's: each by virtual path, mode and host path.
   0, or -1 with the sentence naming the first mount that differs. */
static int mounts_match(const mbxC_snap_header *h, const mbx_policy *p, char *why,
                        size_t why_size) {
  static const char *const modes[] = {"?", "ro", "rw", "?", "overlay"};
  for (uint32_t i = 0; i < h->mount_count; i++) {
    const mbxC_snap_mount *sm = &h->mounts[i];
    const mbxC_fs_mount *pm = NULL;
    for (size_t k = 0; k < p->fs.mount_count && pm == NULL; k++)
      if (strcmp(p->fs.mounts[k].path, sm->path) == 0) pm = &p->fs.mounts[k];
    const char *was = modes[sm->mode <= 4 ? sm->mode : 0];
    if (pm == NULL) {
      snprintf(why, why_size, "the snapshot's mount %s (%s) is not in this policy", sm->path, was);
      return -1;
    }
    if (pm->mode != sm->mode) {
      snprintf(why, why_size, "the mount %s was %s in the snapshot; this policy mounts it %s",
               sm->path, was, modes[pm->mode <= 4 ? pm->mode : 0]);
      return -1;
    }
    if (XXH3_64bits(pm->host, strlen(pm->host)) != sm->host_digest) {
      snprintf(why, why_size,
               "the mount %s reaches another host directory than in the snapshot (its host "
               "path differs)",
               sm->path);
      return -1;
    }
  }
  for (size_t k = 0; k < p->fs.mount_count; k++) {
    uint32_t i = 0;
    while (i < h->mount_count && strcmp(h->mounts[i].path, p->fs.mounts[k].path) != 0)
      i++;
    if (i == h->mount_count) {
      snprintf(why, why_size, "this policy mounts %s, which the snapshot did not have",
               p->fs.mounts[k].path);
      return -1;
    }
  }
  return 0;
}

MBX_API mbx_sandbox *mbx_sandbox_restore(mbx_runtime *rt, const mbx_policy *p, const void *bytes,
                                         size_t len, mbx_error *err) {
  if (rt == NULL || p == NULL || bytes == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_restore: the runtime, the policy and the bytes must not be NULL");
    return NULL;
  }
  if (!p->deterministic) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_restore: the policy is not deterministic; snapshots are made "
                   "and restored under a policy with mbx_policy_set_deterministic");
    return NULL;
  }
  if (mbxC_policy_needs_instructions(p)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_restore: a deterministic policy needs an instruction limit: "
                   "set MBX_LIMIT_INSTRUCTIONS (a deterministic run ends by its instruction "
                   "count, never by the clock)");
    return NULL;
  }
  char why[300];
  mbxC_snap_header h;
  mbxC_replay_log log;
  if (mbxC_snap_decode(bytes, len, LUA_VERSION_RELEASE_NUM, MBX_VERSION_NUMBER, &h, &log, why,
                       sizeof why) != 0) {
    mbxU_error_set(err, MBX_INVALID_INPUT, "mbx_sandbox_restore: %s", why);
    return NULL;
  }
  int mounts_ok = mounts_match(&h, p, why, sizeof why) == 0;
  mbxC_snap_header_free(&h);
  if (!mounts_ok) {
    mbxC_replay_free(&log);
    mbxU_error_set(err, MBX_INVALID_INPUT,
                   "mbx_sandbox_restore: the policy's mounts changed "
                   "since the snapshot: %s",
                   why);
    return NULL;
  }
  uint64_t digest = mbxC_policy_digest(p);
  if (h.policy_digest != digest) {
    mbxC_replay_free(&log);
    mbxU_error_set(err, MBX_INVALID_INPUT,
                   "mbx_sandbox_restore: the snapshot was made under another policy (digest "
                   "%016llx, this policy's is %016llx): limits, clock, seed, environment and "
                   "host functions must be the same",
                   (unsigned long long)h.policy_digest, (unsigned long long)digest);
    return NULL;
  }
  mbx_sandbox *sb = mbxH_sandbox_create(rt, p, &log, err);
  if (sb == NULL) return NULL;
  mbxC_port_record *rec = sb->backend->recorder(sb->impl);
  /* The sandbox's own creation consumed its seed record; now the session, run by run. */
  int ok = replay_session(sb, rec) == 0 && mbxC_port_record_replay_end(rec) == 0;
  if (ok && (sb->poisoned || mbx_sandbox_paused(sb) != h.paused)) {
    mbxC_port_record_diverge(rec, "the replay ended %s where the snapshot was taken %s",
                             sb->poisoned             ? "poisoned"
                             : mbx_sandbox_paused(sb) ? "paused"
                                                      : "idle",
                             h.paused ? "paused" : "idle");
    ok = 0;
  }
  if (!ok) {
    mbxU_error_set(err, MBX_INVALID_INPUT,
                   "mbx_sandbox_restore: the replay diverged from the "
                   "snapshot: %s",
                   mbxC_port_record_divergence(rec));
    mbx_sandbox_free(sb);
    return NULL;
  }
  return sb;
}
