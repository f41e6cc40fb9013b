/* tests/host/test_policy_json.c -- unit tests of host/policy_json.c: the issue's JSON shape is
   loaded, and every rejection names its key and what was expected, leaving the policy as it
   was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/policy.h"
#include "include/moonbox.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/mbx_test_pjson_XXXXXX");
  if (mkdtemp(dir) == NULL) return -1;
  char p[128];
  snprintf(p, sizeof p, "%s/data", dir);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/work", dir);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/orders.csv", dir);
  FILE *f = fopen(p, "w");
  if (f == NULL) return -1;
  fputs("id,total\n1,5\n", f);
  fclose(f);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static mbx_status load(mbx_policy *p, const char *text, mbx_error *err) {
  return mbx_policy_load_json(p, text, strlen(text), dir, err);
}

static void the_issue_shape_loads(void **state) {
  (void)state;
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  const char *text =
      "{\"limits\": {\"memory\": \"64M\", \"instructions\": 1000000000, \"time_ms\": 5000,"
      "  \"output\": \"1M\", \"host_calls\": 1000},"
      " \"fs\": {\"mounts\": [{\"path\": \"/data\", \"host\": \"./data\", \"mode\": \"ro\"},"
      "                      {\"path\": \"/work\", \"host\": \"./work\", \"mode\": \"rw\"}],"
      "        \"files\": [{\"path\": \"/input/orders.csv\", \"host_file\": \"orders.csv\"},"
      "                    {\"path\": \"/input/note.txt\", \"text\": \"inline content\"}],"
      "        \"tmp\": \"8M\", \"quota\": {\"bytes\": \"16M\", \"files\": 1000, \"open_files\": 64}},"
      " \"env\": {\"LANG\": \"C.UTF-8\"}, \"seed\": 42, \"time\": null, \"deterministic\": false}";
  assert_int_equal(load(p, text, &err), MBX_OK);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_MEMORY), 64ull << 20);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_OUTPUT), 1ull << 20);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_FS_BYTES), 16ull << 20);
  assert_int_equal(p->fs.mount_count, 2);
  assert_int_equal(p->fs.mounts[1].mode, MBXC_MOUNT_RW);
  assert_int_equal(p->fs.file_count, 2);
  assert_int_equal(p->fs.files[0].len, 13);
  assert_memory_equal(p->fs.files[0].data, "id,total\n1,5\n", 13);
  assert_true(p->seed_fixed && p->seed == 42);
  assert_int_equal(p->env_count, 1);
  /* Registered modules: {name: source}. */
  assert_int_equal(load(p, "{\"modules\": {\"mylib.parser\": \"return 1\"}}", &err), MBX_OK);
  assert_int_equal(p->fs.module_count, 1);
  assert_string_equal(p->fs.modules[0].path, "mylib.parser");
  assert_memory_equal(p->fs.modules[0].data, "return 1", 8);
  mbx_policy_free(p);
}

/* The one vocabulary (docs/vocabulary.md): timeout as a duration, counts as "1e9", the older
   spellings (time_ms, exec.timeout_ms) still read. */
static void the_vocabulary_names_load(void **state) {
  (void)state;
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  const char *text = "{\"limits\": {\"timeout\": \"1.5s\", \"instructions\": \"1e9\","
                     " \"memory\": \"1T\"}, \"exec\": {\"timeout\": \"2m\"},"
                     " \"fs\": {\"quota\": {\"files\": \"2e3\"}}}";
  assert_int_equal(load(p, text, &err), MBX_OK);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_TIME_MS), 1500);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_INSTRUCTIONS), 1000000000);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_MEMORY), 1ull << 40);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_EXEC_TIMEOUT_MS), 120000);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_FS_FILES), 2000);
  assert_int_equal(
      load(p, "{\"limits\": {\"timeout\": 250}, \"exec\": {\"timeout_ms\": 900}}", &err), MBX_OK);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_TIME_MS), 250);
  assert_int_equal(mbx_policy_get_limit(p, MBX_LIMIT_EXEC_TIMEOUT_MS), 900);
  /* Deterministic needs an instruction limit: the one the policy already holds will do. */
  assert_int_equal(load(p, "{\"deterministic\": true}", &err), MBX_OK);
  mbx_policy_free(p);
}

typedef struct bad_case {
  const char *json;
  const char *message; /* exact */
} bad_case;

static void every_rejection_names_its_key(void **state) {
  (void)state;
  static const bad_case cases[] = {
      {"{\"fs\": {\"mounts\": [{\"path\": \"/data\", \"host\": \"data\"},"
       " {\"path\": \"/w\", \"host\": \"work\", \"mode\": \"wr\"}]}}",
       "fs.mounts[1].mode: expected \"ro\", \"rw\" or \"overlay\", got \"wr\""},
      {"{\"limit\": {}}",
       "limit: unknown key (expected one of: limits, env, seed, time, deterministic, fs, exec, "
       "modules)"},
      {"{\"modules\": [\"x\"]}", "modules: expected an object {name: source}, got an array"},
      {"{\"modules\": {\"m\": 1}}", "modules.m: expected the module's Lua source, a string, got 1"},
      {"{\"limits\": {\"memory\": \"64X\"}}",
       "limits.memory: '64X' is not a size (use a number with an optional k, M, G or T suffix, e.g. 64M)"},
      {"{\"limits\": {\"memory\": true}}",
       "limits.memory: expected a size (bytes, or a string like \"64M\"), got true"},
      {"{\"limits\": {\"memory\": 1000}}",
       "limits.memory: the memory limit must be between 256k and 1T, not 1000 bytes"},
      {"{\"limits\": {\"instructions\": -1}}",
       "limits.instructions: expected a whole number >= 0 (or a string like \"1e9\"), got -1"},
      {"{\"limits\": {\"timeout\": \"5\"}}",
       "limits.timeout: '5' has no unit (write e.g. 5ms or 5s; 0 means no limit)"},
      {"{\"limits\": {\"timeout\": 1000, \"time_ms\": 1000}}",
       "limits.timeout: given twice (as timeout and as time_ms); keep timeout"},
      {"{\"limits\": {\"timeout\": \"25h\"}}",
       "limits.timeout: the timeout must be between 0 and 24h, not 25h"},
      {"{\"limits\": {\"time_ms\": -1}}",
       "limits.time_ms: expected a duration (milliseconds, or a string like \"2s\" or \"500ms\"), got -1"},
      {"{\"seed\": \"42\"}", "seed: expected an integer or null, got \"42\""},
      {"{\"deterministic\": 1}", "deterministic: expected true or false, got 1"},
      {"{\"deterministic\": true}",
       "deterministic: a deterministic policy needs an instruction limit: set limits.instructions "
       "(a count such as \"1e9\"; a deterministic run ends by its instruction count, never by "
       "the clock)"},
      {"{\"deterministic\": true, \"limits\": {\"instructions\": 0}}",
       "deterministic: a deterministic policy needs an instruction limit: set limits.instructions "
       "(a count such as \"1e9\"; a deterministic run ends by its instruction count, never by "
       "the clock)"},
      {"{\"env\": {\"A\": 5}}", "env.A: expected a string, got 5"},
      {"{\"fs\": {\"tmp\": \"8Q\"}}",
       "fs.tmp: '8Q' is not a size (use a number with an optional k, M, G or T suffix, e.g. 64M)"},
      {"{\"fs\": {\"quota\": {\"byte\": 1}}}",
       "fs.quota.byte: unknown key (expected one of: bytes, files, open_files)"},
      {"{\"fs\": {\"mounts\": [{\"path\": \"data\", \"host\": \"data\"}]}}",
       "fs.mounts[0].path: the virtual path \"data\" is relative (write it from /, e.g. /data)"},
      {"{\"fs\": {\"mounts\": [{\"path\": \"/a/../data\", \"host\": \"data\"}]}}",
       "fs.mounts[0].path: the virtual path \"/a/../data\" is not normalized (no '.', '..', '//' "
       "or trailing '/'; did you mean \"/data\"?)"},
      {"{\"fs\": {\"mounts\": [{\"path\": \"/d\\u0000x\", \"host\": \"data\"}]}}",
       "fs.mounts[0].path: the string contains a NUL byte"},
      {"{\"fs\": {\"mounts\": [{\"path\": \"/d\", \"host\": \"data\"},"
       " {\"path\": \"/d/e\", \"host\": \"work\"}]}}",
       "fs.mounts[1].path: \"/d/e\" overlaps the mount at /d (mounts may not nest)"},
      {"{\"fs\": {\"mounts\": [{\"path\": \"/d\", \"host\": \"orders.csv\"}]}}",
       NULL /* "not a directory", checked below */},
      {"{\"fs\": {\"files\": [{\"path\": \"/f\", \"text\": \"x\", \"host_file\": \"y\"}]}}",
       "fs.files[0]: give exactly one of host_file and text"},
      {"{\"fs\": {\"files\": [{\"path\": \"/f\", \"host_file\": \"data\"}]}}", NULL},
      {"{\"fs\": {\"mounts\": {}}}", "fs.mounts: expected an array, got an object"},
      {"[1]", "(top level): expected an object, got an array"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mbx_policy *p = mbx_policy_new();
    mbx_error err;
    memset(&err, 0, sizeof err);
    uint64_t before = mbxC_policy_digest(p);
    assert_int_equal(load(p, cases[i].json, &err), MBX_INVALID_ARGUMENT);
    if (cases[i].message && strcmp(err.message, cases[i].message) != 0)
      fail_msg("case %zu: got %s", i, err.message);
    if (cases[i].message == NULL)
      assert_true(strstr(err.message, "not a directory") ||
                  strstr(err.message, "not a regular file"));
    assert_int_equal(mbxC_policy_digest(p), before); /* nothing changed */
    mbx_policy_free(p);
  }
  /* A refusal after a valid mount leaves the earlier mounts out too. */
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(load(p,
                        "{\"fs\": {\"mounts\": [{\"path\": \"/d\", \"host\": \"data\"}],"
                        " \"tmp\": \"x\"}}",
                        &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(p->fs.mount_count, 0);
  assert_int_equal(load(p,
                        "{\"fs\": {\"mounts\": [{\"path\": \"/d\", \"host\": \"data\","
                        " \"mode\": \"overlay\"}]}}",
                        &err),
                   MBX_OK);
  assert_int_equal(p->fs.mount_count, 1);
  assert_int_equal(p->fs.mounts[0].mode, MBX_MOUNT_OVERLAY);
  assert_int_equal(load(p, "{\"limits\": ", &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "policy JSON, line 1"));
  mbx_policy_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_issue_shape_loads),
      cmocka_unit_test(the_vocabulary_names_load),
      cmocka_unit_test(every_rejection_names_its_key),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
