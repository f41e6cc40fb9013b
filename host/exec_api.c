/* host/exec_api.c -- the public side of the exec backend: its probe (its paths are set with
   mbx_runtime_set_path, host/runtime.c). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "host/runtime.h"

MBX_API mbx_status mbx_runtime_exec_status(mbx_runtime *rt, char **json, size_t *len,
                                           mbx_error *err) {
  if (rt == NULL || json == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_exec_status: the runtime and json must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  *json = mbxC_exec_status_json(&rt->exec);
  if (*json == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_exec_status: out of memory");
    return MBX_NO_MEMORY;
  }
  if (len) *len = strlen(*json);
  return MBX_OK;
}
