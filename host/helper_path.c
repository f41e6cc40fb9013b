/* host/helper_path.c -- the absolute path of a helper executable installed next to the
   library (host/helper_path.h). */
#include "host/helper_path.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

/* <libexecdir>/moonbox relative to <libdir> and to <bindir> (CMakeLists.txt sets both). */
#ifndef MBX_LIBEXEC_FROM_LIB
#define MBX_LIBEXEC_FROM_LIB "../libexec/moonbox"
#endif
#ifndef MBX_LIBEXEC_FROM_BIN
#define MBX_LIBEXEC_FROM_BIN "../libexec/moonbox"
#endif

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
  int from_library = 0;
  Dl_info info;
  /* The shared library's own file when the code runs from libmoonbox.so; for a static link
     dladdr names the executable, which /proc/self/exe gives reliably (argv[0] may be
     relative). */
  if (dladdr((void *)mbxH_helper_path, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
      strstr(info.dli_fname, "libmoonbox") != NULL) {
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    from_library = 1;
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
  /* Beside the library or program first (the build tree), then the installed place,
     <libexecdir>/moonbox, relative to it (so a moved or unpacked tree still works). The
     second is the answer when neither exists: the error then names the installed place. */
  const char *installed = from_library ? MBX_LIBEXEC_FROM_LIB : MBX_LIBEXEC_FROM_BIN;
  int n = snprintf(out, outlen, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= outlen) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "the path of %s is too long", name);
    return MBX_INVALID_ARGUMENT;
  }
  if (access(out, X_OK) == 0) return MBX_OK;
  n = snprintf(out, outlen, "%s/%s/%s", dir, installed, name);
  if (n < 0 || (size_t)n >= outlen) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "the path of %s is too long", name);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}
