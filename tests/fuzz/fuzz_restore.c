/* tests/fuzz/fuzz_restore.c -- libFuzzer harness: arbitrary bytes to mbx_sandbox_restore. */
/* A snapshot blob is untrusted input (docs/SECURITY-MODEL.md). Two kinds of input:
     - raw: the bytes are passed to mbx_sandbox_restore as they are. They reach the decoder's
       checks (magic, versions, build id, bounds, checksum, chain); a mutated real blob gets
       past the magic and exercises every bound;
     - sealed (first byte 'S'): the rest is read as records (u8 type, u16 LE length, payload)
       and wrapped in a valid header for this build and policy, with a valid chain and
       checksum, so the fuzzer drives the replay itself: runs and resumes of arbitrary source
       with arbitrary recorded answers, in any order. The policy mounts a host directory
       (/data ro: a file and a subdirectory) and the header carries that mount, so recorded
       host-file answers (fs_look, fs_open, fs_read, fs_size, fs_list) reach the replay's
       checks of what a host could answer; restore.dict names the record types and the
       guest calls that ask for them.
   Either way: mbx_sandbox_restore returns NULL with a message, or a sandbox that then takes a
   resume or a run (whichever its state allows) and is freed; a crash, a sanitizer report, a
   leak or a NULL without a message fails.

   Build (clang only; tests/CMakeLists.txt adds the target when the compiler is Clang):
     cmake --preset fuzz && cmake --build --preset fuzz
   Run:
     mkdir -p build/fuzz/corpus-restore
     build/fuzz/tests/fuzz_restore -dict=tests/fuzz/restore.dict -max_len=4096 -timeout=5 \
       -rss_limit_mb=2048 \
       -artifact_prefix=build/fuzz/ -max_total_time=600 build/fuzz/corpus-restore */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lua.h>

#include "capabilities/policy.h"
#include "capabilities/replay.h"
#include "moonbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mbx_runtime *rt;
static mbx_policy *policy;

static mbx_status answer(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  return mbx_host_reply_json(reply, args, len);
}

static void setup(void) {
  mbx_error err;
  rt = mbx_runtime_new(&err);
  policy = mbx_policy_new();
  if (rt == NULL || policy == NULL) abort();
  mbx_policy_set_deterministic(policy, 1, &err);
  mbx_policy_set_seed(policy, 1, &err);
  mbx_policy_set_limit(policy, MBX_LIMIT_MEMORY, 1u << 20);
  mbx_policy_set_limit(policy, MBX_LIMIT_INSTRUCTIONS, 100000);
  mbx_policy_set_limit(policy, MBX_LIMIT_TIME_MS, 50);
  mbx_policy_set_env(policy, "HOME", "/home/guest", &err);
  mbx_policy_add_external(policy, "tools.fetch", &err);
  mbx_policy_add_function(policy, "tools.echo", answer, NULL, &err);
  static char dir[] = "/tmp/mbx_fuzz_restore_XXXXXX";
  char path[sizeof dir + 16];
  if (mkdtemp(dir) == NULL) abort();
  snprintf(path, sizeof path, "%s/a.txt", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) abort();
  fputs("alpha\nbeta\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/sub", dir);
  if (mkdir(path, 0755) != 0) abort();
  if (mbx_policy_mount(policy, "/data", dir, MBX_MOUNT_RO, &err) != MBX_OK) abort();
}

/* The sealed form: records from the input inside a valid header, chain and checksum. */
static void *seal(const uint8_t *data, size_t size, size_t *len) {
  mbxC_snap_header h = {.format = MBXC_SNAP_FORMAT,
                        .lua_version = LUA_VERSION_RELEASE_NUM,
                        .moonbox_version = MBX_VERSION_NUMBER,
                        .build_id = mbxC_build_id(),
                        .policy_digest = mbxC_policy_digest(policy),
                        .seed_fixed = 1,
                        .seed = 1,
                        .paused = size > 0 && (data[0] & 1)};
  for (size_t i = 0; i < policy->fs.mount_count; i++)
    if (mbxC_snap_add_mount(&h, policy->fs.mounts[i].path, policy->fs.mounts[i].mode,
                            policy->fs.mounts[i].host) != 0)
      abort();
  mbxC_replay_log log;
  mbxC_replay_init(&log, mbxC_snap_chain0(&h));
  size_t at = size > 0 ? 1 : 0;
  while (at + 3 <= size) {
    int type = data[at];
    size_t n = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
    at += 3;
    if (n > size - at) n = size - at;
    mbxC_replay_begin(&log, (mbxC_rec_type)type);
    for (size_t i = 0; i < n; i++)
      mbxC_replay_put_u8(&log, data[at + i]);
    mbxC_replay_end(&log);
    at += n;
  }
  void *blob = NULL;
  if (mbxC_snap_encode(&h, &log, &blob, len) != 0) blob = NULL;
  mbxC_snap_header_free(&h);
  mbxC_replay_free(&log);
  return blob;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (rt == NULL) setup();
  void *sealed = NULL;
  const void *bytes = data;
  size_t len = size;
  if (size > 0 && data[0] == 'S') {
    sealed = seal(data + 1, size - 1, &len);
    if (sealed == NULL) return 0;
    bytes = sealed;
  }
  mbx_error err = {0};
  mbx_sandbox *sb = mbx_sandbox_restore(rt, policy, bytes ? bytes : "", len, &err);
  if (sb == NULL) {
    if (err.message[0] == '\0') abort(); /* every refusal says why */
  } else {
    mbx_result *res = NULL;
    mbx_status s = mbx_sandbox_paused(sb) ? mbx_resume(sb, "1", 1, &res, &err)
                                          : mbx_run(sb, "return 1", 8, NULL, 0, &res, &err);
    if (s < MBX_API_ERROR_BASE) mbx_result_free(res);
    void *again = NULL;
    size_t again_len = 0;
    if (mbx_sandbox_snapshot(sb, &again, &again_len, &err) == MBX_OK) mbx_free(again);
    mbx_sandbox_free(sb);
  }
  free(sealed);
  return 0;
}
