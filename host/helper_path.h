/* host/helper_path.h -- where the library's helper executables are: never looked up in PATH. */
#ifndef MBX_HOST_HELPER_PATH_H
#define MBX_HOST_HELPER_PATH_H

#include <stddef.h>

#include "include/moonbox.h"

/* Absolute path of helper `name` ("moonbox-exec", "moonbox-worker"): override when non-NULL
   (must be absolute), else in the directory of the loaded libmoonbox (dladdr) or, for a static
   link, of /proc/self/exe: the file there if it exists (the build tree), else the installed
   place, <libexecdir>/moonbox, relative to that directory. */
mbx_status mbxH_helper_path(const char *name, const char *override, char *out, size_t outlen,
                            mbx_error *err);

#endif
