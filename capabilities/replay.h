/* capabilities/replay.h -- the replay log a sandbox's port keeps, and the snapshot blob made
   from it. Plain C: no Lua here. */
#ifndef MBX_CAPABILITIES_REPLAY_H
#define MBX_CAPABILITIES_REPLAY_H

/*
** One ordered stream of typed records holds everything a deterministic sandbox depends on
** besides its policy (DESIGN decision 9):
**   - session records, written by the host (host/backend/inproc.c through port_record.h): every mbx_run (chunk name, source, inputs),
**     every mbx_resume / mbx_resume_error (the value or the message), and after each the
**     outcome (status, a hash of the value/pending call/error message, the host call count)
**     that a replay must reproduce (not the instruction count: the JSON codec's key sort is
**     charged by comparisons, which depend on the per-state string hash seed);
**   - answer records, written by the record/replay layer over the port
**     (capabilities/port_record.c): every clock read, random
**     seed, environment lookup, host call result and native call result, exec result, and
**     every answer a host mount gave the filesystem view (a look at a path, a read-only open,
**     a read, a size, a directory's names: capabilities/vfs.h's tap), in the order the guest
**     asked for them.
**
** Record encoding (little-endian): type u8, payload length u32, payload, then the chain u64:
**     chain_i = XXH3_64(chain_{i-1} as 8 LE bytes || type || length || payload)
** with chain_0 = XXH3_64 of the blob's fixed header (magic .. policy digest), so a record
** cannot be moved to a blob made under another build or policy.
**
** Blob (MBXSNAP1, format 2), all integers little-endian:
**     "MBXSNAP1" | u32 format | u32 lua version | u32 moonbox version | u64 build id |
**     u64 policy digest | u8 seed fixed | u64 seed | u8 time fixed | i64 time |
**     u8 state (0 idle, 1 paused) | u32 record count | u64 log bytes | u64 final chain |
**     u32 mount count | mounts (str virtual path, u8 mode, u64 XXH3_64 of the host path) |
**     records (as above) | u64 XXH3_64 of every byte before it
** The mounts are the policy's at snapshot time, so a restore under other mounts is refused
** naming the mount (the policy digest covers them too, but cannot say which one changed).
** Payloads: strings are u32 length + bytes. The bounds below hold for every field; the
** decoder checks them all before it reads a byte, and checks every record's payload shape.
*/

#include <stddef.h>
#include <stdint.h>

typedef enum mbxC_rec_type {
  /* session records (the host, through capabilities/port_record.h) */
  MBXC_REC_RUN = 1,          /* str chunk name, str source, u8 has inputs, str inputs */
  MBXC_REC_RESUME = 2,       /* str value JSON (empty: no value) */
  MBXC_REC_RESUME_ERROR = 3, /* str message */
  MBXC_REC_OUTCOME = 4,      /* u32 status, u64 hash, u64 host calls */
  /* answer records (the port) */
  MBXC_REC_WALL_TIME = 16,   /* i64 seconds */
  MBXC_REC_CPU_TIME = 17,    /* u64 bits of the double */
  MBXC_REC_RANDOM_SEED = 18, /* u64, u64 */
  MBXC_REC_ENV_GET = 19,     /* str name, u8 found, str value */
  MBXC_REC_HOST_CALL = 20,   /* str function, str args JSON, u8 error, str reply */
  MBXC_REC_NATIVE_CALL =
      21, /* str function, str args hash (8 LE bytes), u8 error, u64 ret, str bytes */
  /* str request hash (8 LE bytes), u8 error, u32 exit code or errnum, u32 signal,
     u8 timed out, u8 truncated, u64 wall ms, str stdout, str stderr (the message on error) */
  MBXC_REC_EXEC = 22,
  /* A host mount's answer to the filesystem view (capabilities/vfs.h, mbxC_vfs_tap), one
     payload shape for all five: u32 mount, str rel, u64 a, u64 b (the request), u32 err,
     u8 walk, u8 type, u64 size, u64 mtime, u64 nlink, u8 failed, u32 errnum, str message,
     str bytes (the answer) */
  MBXC_REC_FS_LOOK = 23,
  MBXC_REC_FS_OPEN = 24,
  MBXC_REC_FS_READ = 25,
  MBXC_REC_FS_SIZE = 26,
  MBXC_REC_FS_LIST = 27,
  /* io.stdin's bytes (the host's, or a descriptor's): u64 asked, u8 failed, u32 errnum,
     str bytes (the message when failed) */
  MBXC_REC_STDIN_READ = 28
} mbxC_rec_type;

#define MBXC_SNAP_MAGIC "MBXSNAP1"
#define MBXC_SNAP_FORMAT 2u
#define MBXC_SNAP_FIXED_HEADER 36 /* magic .. policy digest: what chain_0 hashes */
#define MBXC_SNAP_HEADER 79       /* the header up to the mount count; then the mounts */
#define MBXC_SNAP_MAX_MOUNTS 32   /* MBXC_VFS_MAX_MOUNTS */
#define MBXC_SNAP_MOUNT_PATH_MAX 1024
#define MBXC_REC_OVERHEAD 13 /* type + length + chain */
/* Bounds: a log past them stops recording (the sandbox can no longer be snapshotted), and a
   blob past them is refused. */
#define MBXC_SNAP_MAX_RECORDS (1u << 22)
#define MBXC_SNAP_MAX_LOG ((size_t)256 << 20)
#define MBXC_SNAP_MAX_FIELD ((size_t)64 << 20)
/* Bytes of host files and directory listings one log may hold (the reads a restore answers
   from the log): past it the log stops taking them and mbx_sandbox_snapshot refuses, saying
   how many bytes were read. */
#define MBXC_SNAP_MAX_HOST_BYTES ((uint64_t)64 << 20)

/* The log: encoded records back to back, exactly as the blob holds them. */
typedef struct mbxC_replay_log {
  unsigned char *buf;
  size_t len, cap;
  size_t *offsets; /* where each record starts in buf */
  size_t count, offsets_cap;
  uint64_t chain; /* after the last record (chain_0 when empty) */
  int broken;     /* an append failed (host memory, bounds): the log is incomplete */
  /* the record being written (mbxC_replay_begin .. mbxC_replay_end) */
  size_t open_at;
  int open;
} mbxC_replay_log;

/* An empty log whose chain starts at chain0. */
void mbxC_replay_init(mbxC_replay_log *log, uint64_t chain0);
void mbxC_replay_free(mbxC_replay_log *log);
/* Drop the records from index count on (count <= log->count); the chain goes back to what it
   was after record count - 1 (chain0 when count is 0). */
void mbxC_replay_truncate(mbxC_replay_log *log, size_t count, uint64_t chain0);

/* Writing one record: begin, any number of puts, end. A failure on the way (no memory, a
   bound) marks the log broken and makes the rest no-ops; nothing ever fails loudly. */
void mbxC_replay_begin(mbxC_replay_log *log, mbxC_rec_type type);
void mbxC_replay_put_u8(mbxC_replay_log *log, uint8_t v);
void mbxC_replay_put_u32(mbxC_replay_log *log, uint32_t v);
void mbxC_replay_put_u64(mbxC_replay_log *log, uint64_t v);
void mbxC_replay_put_str(mbxC_replay_log *log, const void *s, size_t n);
void mbxC_replay_end(mbxC_replay_log *log);

/* Record i of the log: its type and payload (pointing into log->buf). */
typedef struct mbxC_record {
  mbxC_rec_type type;
  const unsigned char *payload;
  size_t len;
} mbxC_record;
int mbxC_replay_get(const mbxC_replay_log *log, size_t i, mbxC_record *r);
const char *mbxC_rec_type_name(int type);

/* Reading a payload: every get checks the bytes left; past the end (or a string longer than
   MBXC_SNAP_MAX_FIELD) sets bad and returns zeros / an empty string. */
typedef struct mbxC_reader {
  const unsigned char *p;
  size_t left;
  int bad;
} mbxC_reader;
mbxC_reader mbxC_reader_of(const mbxC_record *r);
uint8_t mbxC_read_u8(mbxC_reader *rd);
uint32_t mbxC_read_u32(mbxC_reader *rd);
uint64_t mbxC_read_u64(mbxC_reader *rd);
const char *mbxC_read_str(mbxC_reader *rd, size_t *n);
/* 1 when every byte was read and nothing was out of bounds. */
int mbxC_reader_done(const mbxC_reader *rd);

/* chain_i from chain_{i-1} and the record's encoded bytes (type, length, payload). */
uint64_t mbxC_replay_chain(uint64_t prev, const void *record, size_t len);

/* The identity of this build: a mismatch is refused (stdlib charges drive os.clock). */
uint64_t mbxC_build_id(void);

/* What the blob's header says. */
/* One mount as the header records it. */
typedef struct mbxC_snap_mount {
  char *path; /* the virtual path, NUL-terminated (owned by the header's array) */
  size_t path_len;
  uint8_t mode;         /* MBXC_MOUNT_* */
  uint64_t host_digest; /* XXH3_64 of the resolved host path */
} mbxC_snap_mount;

typedef struct mbxC_snap_header {
  uint32_t format;
  uint32_t lua_version;
  uint32_t moonbox_version;
  uint64_t build_id;
  uint64_t policy_digest;
  uint8_t seed_fixed;
  uint64_t seed;
  uint8_t time_fixed;
  int64_t time;
  uint8_t paused;
  uint32_t mount_count;
  mbxC_snap_mount *mounts; /* malloc'd (mbxC_snap_add_mount, the decoder) */
} mbxC_snap_header;

/* Append a mount to h (its path copied, the host path digested). 0, or -1 out of memory or
   past MBXC_SNAP_MAX_MOUNTS. */
int mbxC_snap_add_mount(mbxC_snap_header *h, const char *path, int mode, const char *host);
/* Free h's mounts (a shallow copy of h shares them: free one). */
void mbxC_snap_header_free(mbxC_snap_header *h);

/* chain_0 of a log made under h (the fixed part of the header). */
uint64_t mbxC_snap_chain0(const mbxC_snap_header *h);
/* The blob of h and log, malloc'd. Returns 0, or -1 when out of memory. */
int mbxC_snap_encode(const mbxC_snap_header *h, const mbxC_replay_log *log, void **bytes,
                     size_t *len);
/* Parse and check a blob: magic, format, every bound, the trailer hash, every record's
   payload shape and the chain over the whole log. The versions and build id are returned
   in *h for the caller to compare (expected_* mismatches are refused here too). On success
   *log holds a copy of the records (mbxC_replay_free it), h->mounts the mounts
   (mbxC_snap_header_free it) and 0 is returned; otherwise -1 with a sentence in why, and
   nothing to free. Never reads outside bytes[0..len). */
int mbxC_snap_decode(const void *bytes, size_t len, uint32_t expected_lua,
                     uint32_t expected_version, mbxC_snap_header *h, mbxC_replay_log *log,
                     char *why, size_t why_size);

#endif
