/* host/helper_path.c -- the absolute path of a helper executable installed next to the
   library (host/helper_path.h). */
#include "host/helper_path.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

mbx_status mbxH_helper_path(const char *name, const char *override, char *out, size_t outlen,
                            mbx_error *err) {
  if (override) {
    if (override[0] != '/' || strlen(override) >= outlen) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "the path of %s must be absolute and shorter than %zu bytes, not \"%s\"", name,
                     outlen, override);
      return MBX_INVALID_ARGUMENT;
    }
    memcpy(out, override, strlen(override) + 1);
    return MBX_OK;
  }
  char dir[PATH_MAX] = "";
  Dl_info info;
  /* The shared library's own file when the code runs from libmoonbox.so; for a static link
     dladdr names the executable, which /proc/self/exe gives reliably (argv[0] may be
     relative). */
  if (dladdr((void *)mbxH_helper_path, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
      strstr(info.dli_fname, "libmoonbox") != NULL) {
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
  } else {
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0) {
      mbxU_error_set(err, MBX_UNSUPPORTED,
                     "cannot find %s: /proc/self/exe is unreadable; set "
                     "its path with mbx_runtime_set_path",
                     name);
      return MBX_UNSUPPORTED;
    }
    dir[n] = '\0';
  }
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  int n = snprintf(out, outlen, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= outlen) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "the path of %s is too long", name);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}
