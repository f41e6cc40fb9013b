/* capabilities/replay.c -- the replay log and the snapshot blob (format in replay.h). */
#include "capabilities/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "include/moonbox.h"

/* ---- little-endian helpers ---- */

static void le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static void le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

/* ---- the log ---- */

void mbxC_replay_init(mbxC_replay_log *log, uint64_t chain0) {
  memset(log, 0, sizeof *log);
  log->chain = chain0;
}

void mbxC_replay_free(mbxC_replay_log *log) {
  free(log->buf);
  free(log->offsets);
  memset(log, 0, sizeof *log);
}

void mbxC_replay_truncate(mbxC_replay_log *log, size_t count, uint64_t chain0) {
  if (count >= log->count) return;
  log->len = log->offsets[count];
  log->count = count;
  log->chain = count == 0 ? chain0 : get64(log->buf + log->len - 8);
  log->open = 0;
}

static int reserve(mbxC_replay_log *log, size_t more) {
  if (log->broken) return 0;
  if (more > MBXC_SNAP_MAX_LOG || log->len + more > MBXC_SNAP_MAX_LOG) {
    log->broken = 1;
    return 0;
  }
  if (log->len + more <= log->cap) return 1;
  size_t cap = log->cap ? log->cap : 256;
  while (cap < log->len + more)
    cap *= 2;
  unsigned char *grown = realloc(log->buf, cap);
  if (grown == NULL) {
    log->broken = 1;
    return 0;
  }
  log->buf = grown;
  log->cap = cap;
  return 1;
}

static void put(mbxC_replay_log *log, const void *p, size_t n) {
  if (!log->open || !reserve(log, n)) return;
  if (n) memcpy(log->buf + log->len, p, n);
  log->len += n;
}

void mbxC_replay_begin(mbxC_replay_log *log, mbxC_rec_type type) {
  log->open = 0;
  if (log->broken) return;
  if (log->count >= MBXC_SNAP_MAX_RECORDS) {
    log->broken = 1;
    return;
  }
  if (log->count == log->offsets_cap) {
    size_t cap = log->offsets_cap ? log->offsets_cap * 2 : 64;
    size_t *grown = realloc(log->offsets, cap * sizeof *grown);
    if (grown == NULL) {
      log->broken = 1;
      return;
    }
    log->offsets = grown;
    log->offsets_cap = cap;
  }
  if (!reserve(log, 5)) return;
  log->open_at = log->len;
  log->open = 1;
  unsigned char head[5] = {(unsigned char)type, 0, 0, 0, 0};
  put(log, head, 5);
}

void mbxC_replay_put_u8(mbxC_replay_log *log, uint8_t v) {
  put(log, &v, 1);
}

void mbxC_replay_put_u32(mbxC_replay_log *log, uint32_t v) {
  unsigned char b[4];
  le32(b, v);
  put(log, b, 4);
}

void mbxC_replay_put_u64(mbxC_replay_log *log, uint64_t v) {
  unsigned char b[8];
  le64(b, v);
  put(log, b, 8);
}

void mbxC_replay_put_str(mbxC_replay_log *log, const void *s, size_t n) {
  if (n > MBXC_SNAP_MAX_FIELD) {
    log->broken = 1; /* mbxC_replay_end drops the record */
    return;
  }
  mbxC_replay_put_u32(log, (uint32_t)n);
  put(log, s, n);
}

void mbxC_replay_end(mbxC_replay_log *log) {
  if (!log->open || log->broken) {
    /* A record cut short is dropped whole; the log is marked broken. */
    if (log->open) log->len = log->open_at;
    log->open = 0;
    log->broken = 1;
    return;
  }
  size_t payload = log->len - log->open_at - 5;
  if (payload > MBXC_SNAP_MAX_FIELD * 2 || !reserve(log, 8)) {
    log->len = log->open_at;
    log->open = 0;
    log->broken = 1;
    return;
  }
  le32(log->buf + log->open_at + 1, (uint32_t)payload);
  log->chain = mbxC_replay_chain(log->chain, log->buf + log->open_at, payload + 5);
  le64(log->buf + log->len, log->chain);
  log->len += 8;
  log->offsets[log->count++] = log->open_at;
  log->open = 0;
}

int mbxC_replay_get(const mbxC_replay_log *log, size_t i, mbxC_record *r) {
  if (i >= log->count) return 0;
  const unsigned char *at = log->buf + log->offsets[i];
  r->type = (mbxC_rec_type)at[0];
  r->len = get32(at + 1);
  r->payload = at + 5;
  return 1;
}

const char *mbxC_rec_type_name(int type) {
  switch (type) {
  case MBXC_REC_RUN:
    return "run";
  case MBXC_REC_RESUME:
    return "resume";
  case MBXC_REC_RESUME_ERROR:
    return "resume_error";
  case MBXC_REC_OUTCOME:
    return "outcome";
  case MBXC_REC_WALL_TIME:
    return "wall_time";
  case MBXC_REC_CPU_TIME:
    return "cpu_time";
  case MBXC_REC_RANDOM_SEED:
    return "random_seed";
  case MBXC_REC_ENV_GET:
    return "env_get";
  case MBXC_REC_HOST_CALL:
    return "host_call";
  case MBXC_REC_NATIVE_CALL:
    return "native_call";
  case MBXC_REC_EXEC:
    return "exec";
  case MBXC_REC_FS_LOOK:
    return "fs_look";
  case MBXC_REC_FS_OPEN:
    return "fs_open";
  case MBXC_REC_FS_READ:
    return "fs_read";
  case MBXC_REC_FS_SIZE:
    return "fs_size";
  case MBXC_REC_FS_LIST:
    return "fs_list";
  case MBXC_REC_STDIN_READ:
    return "stdin_read";
  default:
    return "unknown";
  }
}

/* ---- reading payloads ---- */

mbxC_reader mbxC_reader_of(const mbxC_record *r) {
  return (mbxC_reader){.p = r->payload, .left = r->len, .bad = 0};
}

static const unsigned char *take(mbxC_reader *rd, size_t n) {
  if (rd->bad || n > rd->left) {
    rd->bad = 1;
    return NULL;
  }
  const unsigned char *at = rd->p;
  rd->p += n;
  rd->left -= n;
  return at;
}

uint8_t mbxC_read_u8(mbxC_reader *rd) {
  const unsigned char *p = take(rd, 1);
  return p ? p[0] : 0;
}

uint32_t mbxC_read_u32(mbxC_reader *rd) {
  const unsigned char *p = take(rd, 4);
  return p ? get32(p) : 0;
}

uint64_t mbxC_read_u64(mbxC_reader *rd) {
  const unsigned char *p = take(rd, 8);
  return p ? get64(p) : 0;
}

const char *mbxC_read_str(mbxC_reader *rd, size_t *n) {
  uint32_t len = mbxC_read_u32(rd);
  const unsigned char *p = len <= MBXC_SNAP_MAX_FIELD ? take(rd, len) : NULL;
  if (p == NULL) {
    rd->bad = 1;
    *n = 0;
    return "";
  }
  *n = len;
  return (const char *)p;
}

int mbxC_reader_done(const mbxC_reader *rd) {
  return !rd->bad && rd->left == 0;
}

/* ---- hashing ---- */

uint64_t mbxC_replay_chain(uint64_t prev, const void *record, size_t len) {
  XXH3_state_t st;
  unsigned char p[8];
  le64(p, prev);
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, p, 8);
  XXH3_64bits_update(&st, record, len);
  return XXH3_64bits_digest(&st);
}

uint64_t mbxC_build_id(void) {
  /* The compile time of this file and the version: a library rebuilt from other sources
     without this file recompiled keeps its id, which the docs point out. */
  static const char id[] = MBX_VERSION " " __DATE__ " " __TIME__
#ifdef MBX_ARENA_MALLOC
                                       " arena-malloc"
#endif
      ;
  return XXH3_64bits(id, sizeof id - 1);
}

/* ---- the blob ---- */

int mbxC_snap_add_mount(mbxC_snap_header *h, const char *path, int mode, const char *host) {
  size_t n = strlen(path);
  if (h->mount_count >= MBXC_SNAP_MAX_MOUNTS || n > MBXC_SNAP_MOUNT_PATH_MAX) return -1;
  mbxC_snap_mount *grown = realloc(h->mounts, (h->mount_count + 1) * sizeof *grown);
  if (grown == NULL) return -1;
  h->mounts = grown;
  char *copy = malloc(n + 1);
  if (copy == NULL) return -1;
  memcpy(copy, path, n + 1);
  h->mounts[h->mount_count++] = (mbxC_snap_mount){.path = copy,
                                                  .path_len = n,
                                                  .mode = (uint8_t)mode,
                                                  .host_digest = XXH3_64bits(host, strlen(host))};
  return 0;
}

void mbxC_snap_header_free(mbxC_snap_header *h) {
  for (uint32_t i = 0; i < h->mount_count; i++)
    free(h->mounts[i].path);
  free(h->mounts);
  h->mounts = NULL;
  h->mount_count = 0;
}

/* The bytes the mount section takes. */
static size_t mounts_size(const mbxC_snap_header *h) {
  size_t n = 0;
  for (uint32_t i = 0; i < h->mount_count; i++)
    n += 4 + h->mounts[i].path_len + 1 + 8;
  return n;
}

static void fixed_header(const mbxC_snap_header *h, unsigned char *b) {
  memcpy(b, MBXC_SNAP_MAGIC, 8);
  le32(b + 8, h->format);
  le32(b + 12, h->lua_version);
  le32(b + 16, h->moonbox_version);
  le64(b + 20, h->build_id);
  le64(b + 28, h->policy_digest);
}

uint64_t mbxC_snap_chain0(const mbxC_snap_header *h) {
  unsigned char b[MBXC_SNAP_FIXED_HEADER];
  fixed_header(h, b);
  return XXH3_64bits(b, sizeof b);
}

int mbxC_snap_encode(const mbxC_snap_header *h, const mbxC_replay_log *log, void **bytes,
                     size_t *len) {
  size_t mlen = mounts_size(h), head = MBXC_SNAP_HEADER + mlen;
  size_t total = head + log->len + 8;
  unsigned char *b = malloc(total);
  if (b == NULL) return -1;
  fixed_header(h, b);
  b[36] = h->seed_fixed;
  le64(b + 37, h->seed);
  b[45] = h->time_fixed;
  le64(b + 46, (uint64_t)h->time);
  b[54] = h->paused;
  le32(b + 55, (uint32_t)log->count);
  le64(b + 59, (uint64_t)log->len);
  le64(b + 67, log->chain);
  le32(b + 75, h->mount_count);
  unsigned char *p = b + MBXC_SNAP_HEADER;
  for (uint32_t i = 0; i < h->mount_count; i++) {
    const mbxC_snap_mount *m = &h->mounts[i];
    le32(p, (uint32_t)m->path_len);
    memcpy(p + 4, m->path, m->path_len);
    p[4 + m->path_len] = m->mode;
    le64(p + 5 + m->path_len, m->host_digest);
    p += 4 + m->path_len + 1 + 8;
  }
  if (log->len) memcpy(b + head, log->buf, log->len);
  le64(b + head + log->len, XXH3_64bits(b, head + log->len));
  *bytes = b;
  *len = total;
  return 0;
}

/* The payload of one record has the shape its type requires. */
static int record_shape_ok(const mbxC_record *r) {
  mbxC_reader rd = mbxC_reader_of(r);
  size_t n;
  switch (r->type) {
  case MBXC_REC_RUN:
    mbxC_read_str(&rd, &n);
    mbxC_read_str(&rd, &n);
    if (mbxC_read_u8(&rd) > 1) return 0;
    mbxC_read_str(&rd, &n);
    break;
  case MBXC_REC_RESUME:
  case MBXC_REC_RESUME_ERROR:
    mbxC_read_str(&rd, &n);
    break;
  case MBXC_REC_OUTCOME:
    mbxC_read_u32(&rd);
    mbxC_read_u64(&rd);
    mbxC_read_u64(&rd);
    break;
  case MBXC_REC_WALL_TIME:
  case MBXC_REC_CPU_TIME:
    mbxC_read_u64(&rd);
    break;
  case MBXC_REC_RANDOM_SEED:
    mbxC_read_u64(&rd);
    mbxC_read_u64(&rd);
    break;
  case MBXC_REC_ENV_GET:
    mbxC_read_str(&rd, &n);
    if (mbxC_read_u8(&rd) > 1) return 0;
    mbxC_read_str(&rd, &n);
    break;
  case MBXC_REC_HOST_CALL:
    mbxC_read_str(&rd, &n);
    mbxC_read_str(&rd, &n);
    if (mbxC_read_u8(&rd) > 1) return 0;
    mbxC_read_str(&rd, &n);
    break;
  case MBXC_REC_NATIVE_CALL:
    mbxC_read_str(&rd, &n);
    mbxC_read_str(&rd, &n);
    if (mbxC_read_u8(&rd) > 1) return 0;
    mbxC_read_u64(&rd);
    mbxC_read_str(&rd, &n);
    break;
  case MBXC_REC_FS_LOOK:
  case MBXC_REC_FS_OPEN:
  case MBXC_REC_FS_READ:
  case MBXC_REC_FS_SIZE:
  case MBXC_REC_FS_LIST:
    if (mbxC_read_u32(&rd) >= MBXC_SNAP_MAX_MOUNTS) return 0;
    mbxC_read_str(&rd, &n);
    if (n > MBXC_SNAP_MOUNT_PATH_MAX) return 0;
    mbxC_read_u64(&rd);
    mbxC_read_u64(&rd);
    if (mbxC_read_u32(&rd) > 4095 || mbxC_read_u8(&rd) > 1 || mbxC_read_u8(&rd) > 4) return 0;
    mbxC_read_u64(&rd);
    mbxC_read_u64(&rd);
    mbxC_read_u64(&rd);
    if (mbxC_read_u8(&rd) > 1 || mbxC_read_u32(&rd) > 4095) return 0;
    mbxC_read_str(&rd, &n);
    if (n > 255) return 0;
    mbxC_read_str(&rd, &n);
    break;
  case MBXC_REC_STDIN_READ: {
    uint64_t asked = mbxC_read_u64(&rd);
    uint8_t failed = mbxC_read_u8(&rd);
    if (failed > 1 || mbxC_read_u32(&rd) > 4095) return 0;
    mbxC_read_str(&rd, &n);
    if (failed ? n > 255 : n > asked) return 0; /* a message, or the bytes asked for at most */
    break;
  }
  case MBXC_REC_EXEC: {
    mbxC_read_str(&rd, &n);
    if (n != 8 || mbxC_read_u8(&rd) > 1) return 0;
    mbxC_read_u32(&rd);
    if (mbxC_read_u32(&rd) > 64 || mbxC_read_u8(&rd) > 1 || mbxC_read_u8(&rd) > 1) return 0;
    mbxC_read_u64(&rd);
    mbxC_read_str(&rd, &n);
    mbxC_read_str(&rd, &n);
    /* The limit fields (issue 12), absent from records written before them. */
    if (!mbxC_reader_done(&rd)) {
      if (mbxC_read_u32(&rd) >= 64 || mbxC_read_u8(&rd) > 1 || mbxC_read_u8(&rd) > 1) return 0;
      mbxC_read_u64(&rd);
      if (mbxC_read_u8(&rd) > 1) return 0;
      mbxC_read_str(&rd, &n);
      if (n >= 200) return 0;
    }
    break;
  }
  default:
    return 0;
  }
  return mbxC_reader_done(&rd);
}

#define REFUSE(...)                                                                                \
  do {                                                                                             \
    snprintf(why, why_size, __VA_ARGS__);                                                          \
    return -1;                                                                                     \
  } while (0)

int mbxC_snap_decode(const void *bytes, size_t len, uint32_t expected_lua,
                     uint32_t expected_version, mbxC_snap_header *h, mbxC_replay_log *log,
                     char *why, size_t why_size) {
  const unsigned char *b = bytes;
  memset(log, 0, sizeof *log);
  memset(h, 0, sizeof *h);
  if (b == NULL || len < MBXC_SNAP_HEADER + 8)
    REFUSE("the snapshot is %zu bytes, shorter than its %d-byte header: truncated", len,
           MBXC_SNAP_HEADER + 8);
  if (memcmp(b, MBXC_SNAP_MAGIC, 8) != 0)
    REFUSE("not a moonbox snapshot (the magic is not " MBXC_SNAP_MAGIC ")");
  h->format = get32(b + 8);
  h->lua_version = get32(b + 12);
  h->moonbox_version = get32(b + 16);
  h->build_id = get64(b + 20);
  h->policy_digest = get64(b + 28);
  if (h->format != MBXC_SNAP_FORMAT)
    REFUSE("snapshot format %u is not supported (this build reads format %u)", h->format,
           MBXC_SNAP_FORMAT);
  if (h->lua_version != expected_lua)
    REFUSE("the snapshot was made with Lua release %u; this build runs %u", h->lua_version,
           expected_lua);
  if (h->moonbox_version != expected_version)
    REFUSE("the snapshot was made by moonbox version number %u; this is %u", h->moonbox_version,
           expected_version);
  if (h->build_id != mbxC_build_id())
    REFUSE("the snapshot was made by another build of moonbox (build id %016llx, this one "
           "%016llx): instruction charges, which drive os.clock, may differ between builds",
           (unsigned long long)h->build_id, (unsigned long long)mbxC_build_id());
  h->seed_fixed = b[36];
  h->seed = get64(b + 37);
  h->time_fixed = b[45];
  h->time = (int64_t)get64(b + 46);
  h->paused = b[54];
  uint32_t count = get32(b + 55);
  uint64_t log_len = get64(b + 59);
  uint64_t final_chain = get64(b + 67);
  uint32_t mounts = get32(b + 75);
  if (h->seed_fixed > 1 || h->time_fixed > 1 || h->paused > 1)
    REFUSE("the snapshot header is corrupt (a flag byte is neither 0 nor 1)");
  if (mounts > MBXC_SNAP_MAX_MOUNTS)
    REFUSE("the snapshot claims %u mounts; at most %d are allowed", mounts, MBXC_SNAP_MAX_MOUNTS);
  /* The mount section: every length inside the blob before anything is copied. */
  size_t head = MBXC_SNAP_HEADER;
  for (uint32_t i = 0; i < mounts; i++) {
    if (len - 8 - head < 4) REFUSE("mount %u of the snapshot's header is truncated", i);
    uint32_t plen = get32(b + head);
    if (plen == 0 || plen > MBXC_SNAP_MOUNT_PATH_MAX || len - 8 - head - 4 < (size_t)plen + 9)
      REFUSE("mount %u of the snapshot's header is truncated or too long", i);
    if (memchr(b + head + 4, '\0', plen) != NULL || b[head + 4] != '/')
      REFUSE("mount %u of the snapshot's header is not an absolute path", i);
    uint8_t mode = b[head + 4 + plen];
    if (mode != 1 && mode != 2 && mode != 4)
      REFUSE("mount %u of the snapshot's header has mode %u (not ro, rw or overlay)", i, mode);
    head += 4 + (size_t)plen + 9;
  }
  if (count > MBXC_SNAP_MAX_RECORDS)
    REFUSE("the snapshot claims %u records; at most %u are allowed", count, MBXC_SNAP_MAX_RECORDS);
  if (log_len > MBXC_SNAP_MAX_LOG)
    REFUSE("the snapshot claims a %llu-byte log; at most %zu bytes are allowed",
           (unsigned long long)log_len, MBXC_SNAP_MAX_LOG);
  if (log_len != len - head - 8)
    REFUSE("the snapshot is %zu bytes but its header announces %llu: truncated or extended", len,
           (unsigned long long)(log_len + head + 8));
  if (get64(b + len - 8) != XXH3_64bits(b, len - 8))
    REFUSE("the snapshot's checksum does not match its bytes: it was modified or damaged");
  /* Walk the records: every length within the log, every payload well formed, the chain
     recomputed and compared at every step. */
  uint64_t chain = mbxC_snap_chain0(h);
  const unsigned char *recs = b + head;
  size_t at = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (log_len - at < MBXC_REC_OVERHEAD)
      REFUSE("record %u of the snapshot runs past the end of its log", i);
    uint32_t plen = get32(recs + at + 1);
    if (plen > log_len - at - MBXC_REC_OVERHEAD)
      REFUSE("record %u of the snapshot runs past the end of its log", i);
    mbxC_record r = {.type = (mbxC_rec_type)recs[at], .payload = recs + at + 5, .len = plen};
    if (!record_shape_ok(&r))
      REFUSE("record %u of the snapshot (%s) is malformed", i, mbxC_rec_type_name(recs[at]));
    chain = mbxC_replay_chain(chain, recs + at, (size_t)plen + 5);
    if (get64(recs + at + 5 + plen) != chain)
      REFUSE("the hash chain breaks at record %u of the snapshot: it was modified", i);
    at += (size_t)plen + MBXC_REC_OVERHEAD;
  }
  if (at != log_len) REFUSE("the snapshot has bytes after its last record");
  if (chain != final_chain) REFUSE("the snapshot's final chain value does not match its log");
  /* Copy it into a log the port can keep appending to. */
  mbxC_replay_init(log, chain);
  size_t cap = log_len ? (size_t)log_len : 1;
  log->buf = malloc(cap);
  log->offsets = malloc((count ? count : 1) * sizeof *log->offsets);
  if (log->buf == NULL || log->offsets == NULL) {
    mbxC_replay_free(log);
    REFUSE("out of host memory for the snapshot's log");
  }
  if (log_len) memcpy(log->buf, recs, (size_t)log_len);
  log->len = log->cap = (size_t)log_len;
  log->offsets_cap = count ? count : 1;
  at = 0;
  for (uint32_t i = 0; i < count; i++) {
    log->offsets[i] = at;
    at += (size_t)get32(recs + at + 1) + MBXC_REC_OVERHEAD;
  }
  log->count = count;
  for (size_t at_m = MBXC_SNAP_HEADER; h->mount_count < mounts;) {
    uint32_t plen = get32(b + at_m);
    char path[MBXC_SNAP_MOUNT_PATH_MAX + 1];
    memcpy(path, b + at_m + 4, plen);
    path[plen] = '\0';
    uint32_t k = h->mount_count;
    if (mbxC_snap_add_mount(h, path, b[at_m + 4 + plen], "") != 0) {
      mbxC_snap_header_free(h);
      mbxC_replay_free(log);
      REFUSE("out of host memory for the snapshot's mounts");
    }
    h->mounts[k].host_digest = get64(b + at_m + 5 + plen);
    at_m += 4 + (size_t)plen + 9;
  }
  return 0;
}
