/* host/worker_api.c -- the public side of worker mode's probe: what a worker's jail applies on
   this machine (moonbox doctor). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/error.h"
#include "host/helper_path.h"
#include "host/runtime.h"
#include "host/backend/worker_pool.h"
#include "host/backend/worker_proto.h"

static char *status_json(const char *path, int ok, const char *reason, uint32_t bits,
                         uint32_t jail_us) {
  json_t *o = json_object();
  json_object_set_new(o, "available", json_boolean(ok));
  json_object_set_new(o, "reason", reason ? json_string(reason) : json_null());
  json_object_set_new(o, "worker", json_string(path));
  if (ok) {
    const char *uid = (bits & MBXH_JAIL_UID_OWN)
                          ? "the zygote's own (one of exec.uids, held while it lives), no groups"
                      : (bits & MBXH_JAIL_UID_NOBODY) ? "nobody (65534, no groups)"
                      : (bits & MBXH_JAIL_USER_NS)    ? "its own non-root uid, in a user namespace"
                                                      : "unchanged (no user namespaces here)";
    json_object_set_new(o, "uid", json_string(uid));
    /* Which path a worker's start takes, and what it cost in the probe just made. */
    const char *ns = (bits & MBXH_JAIL_UID_NOBODY)
                         ? "none (root: each worker drops to its zygote's uid after the fork)"
                     : (bits & MBXH_JAIL_USER_NS)
                         ? "shared (one, made at the zygote's start; a worker costs a fork)"
                         : "none (user namespaces are off: seccomp is the whole jail)";
    json_object_set_new(o, "user_namespace", json_string(ns));
    json_object_set_new(o, "capabilities",
                        json_string((bits & MBXH_JAIL_NO_CAPS) ? "none" : "SOME LEFT"));
    json_object_set_new(o, "worker_start_us", json_integer((json_int_t)jail_us));
    json_object_set_new(o, "no_new_privs", json_boolean(bits & MBXH_JAIL_NO_NEW_PRIVS));
    json_object_set_new(o, "seccomp",
                        json_string(!(bits & MBXH_JAIL_SECCOMP)   ? "UNAVAILABLE"
                                    : (bits & MBXH_JAIL_PREBUILT) ? "allow-list (prebuilt BPF)"
                                                                  : "allow-list (compiled per "
                                                                    "worker)"));
    json_object_set_new(o, "pid_namespace", json_boolean(bits & MBXH_WP_NS_PID));
    json_object_set_new(o, "net_namespace", json_boolean(bits & MBXH_WP_NS_NET));
  }
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return text;
}

MBX_API mbx_status mbx_runtime_worker_status(mbx_runtime *rt, char **json, size_t *len,
                                             mbx_error *err) {
  if (rt == NULL || json == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_worker_status: the runtime and json must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  char path[PATH_MAX] = "";
  mbx_error why;
  memset(&why, 0, sizeof why);
  mbx_status s =
      mbxH_helper_path("moonbox-worker", rt->paths[MBX_PATH_WORKER], path, sizeof path, &why);
  uint32_t bits = 0, jail_us = 0;
  if (s == MBX_OK) {
    /* The runtime's own pool when it is isolated; else one for the probe only. */
    mbxH_wpool *pool = rt->workers ? rt->workers : mbxH_wpool_new(path);
    if (pool == NULL) {
      mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_worker_status: out of memory");
      return MBX_NO_MEMORY;
    }
    s = mbxH_wpool_probe(pool, &bits, &jail_us, &why);
    if (pool != rt->workers) mbxH_wpool_free(pool);
  }
  *json = status_json(path, s == MBX_OK, s == MBX_OK ? NULL : why.message, bits, jail_us);
  if (*json == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_worker_status: out of memory");
    return MBX_NO_MEMORY;
  }
  if (len) *len = strlen(*json);
  return MBX_OK;
}
