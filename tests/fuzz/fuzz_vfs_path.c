/* tests/fuzz/fuzz_vfs_path.c -- libFuzzer harness of the VFS's path normalization and mount
   matching (capabilities/vfs.c). No path the guest can write may resolve to anything but a
   mount's own subtree or the memory tree: for each input (a guest path; with first byte 'M'
   the rest is appended to "/data/", as a guest under a mount would write it) it checks that
     - normalization succeeds or answers EINVAL / ENOENT / ENAMETOOLONG, nothing else;
     - the result is absolute, has no empty, "." or ".." component and no trailing slash,
       is at most MBXC_VFS_PATH_MAX bytes, and normalizing it again changes nothing;
     - it equals an independent stack-of-components model of the same rules;
     - the mount it matches is the longest prefix that covers it on a component boundary,
       and prefix + "/" + rest gives back the path, so the rest has no ".." that could climb
       out of the mount's directory fd (which only ever sees the rest).
   Any broken check aborts, so libFuzzer keeps the input. Run (tools/dev fuzz_smoke does):
     build/fuzz/tests/fuzz_vfs_path -max_len=2048 -max_total_time=60 build/fuzz/vfs-corpus */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capabilities/vfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_vfs_path: check failed: %s (line %d)\n", #cond, __LINE__);             \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* The model: split on '/', keep a stack of components. */
static int model(const char *in, size_t len, char *out, size_t cap) {
  if (len > MBXC_VFS_PATH_MAX) return ENAMETOOLONG;
  const char *comp[MBXC_VFS_PATH_MAX];
  size_t clen[MBXC_VFS_PATH_MAX], n = 0;
  for (size_t i = 0; i < len;) {
    size_t j = i;
    while (j < len && in[j] != '/')
      j++;
    size_t k = j - i;
    if (k == 0 || (k == 1 && in[i] == '.')) {
    } else if (k == 2 && in[i] == '.' && in[i + 1] == '.') {
      if (n) n--;
    } else {
      if (k > MBXC_VFS_NAME_MAX) return ENAMETOOLONG;
      comp[n] = in + i;
      clen[n++] = k;
    }
    i = j + 1;
  }
  size_t o = 0;
  if (n == 0) out[o++] = '/';
  for (size_t c = 0; c < n; c++) {
    if (o + 1 + clen[c] > MBXC_VFS_PATH_MAX || o + 1 + clen[c] + 1 > cap) return ENAMETOOLONG;
    out[o++] = '/';
    memcpy(out + o, comp[c], clen[c]);
    o += clen[c];
  }
  out[o] = '\0';
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char in[4096], out[MBXC_VFS_PATH_BUF], again[MBXC_VFS_PATH_BUF], ref[MBXC_VFS_PATH_BUF];
  size_t len = 0;
  if (size > 0 && data[0] == 'M') {
    memcpy(in, "/data/", 6);
    len = 6;
    data++;
    size--;
  }
  if (size > sizeof in - len) size = sizeof in - len;
  memcpy(in + len, data, size);
  len += size;
  size_t n;
  int r = mbxC_vfs_normalize(in, len, out, sizeof out, &n);
  if (r != 0) {
    CHECK(r == EINVAL || r == ENOENT || r == ENAMETOOLONG);
    CHECK(r != EINVAL || memchr(in, '\0', len) != NULL);
    CHECK(r != ENOENT || len == 0);
    if (r == ENAMETOOLONG && memchr(in, '\0', len) == NULL) {
      int m = model(in, len, ref, sizeof ref);
      CHECK(m != 0); /* the model finds it too long as well (a name or the whole path) */
    }
    return 0;
  }
  CHECK(n == strlen(out) && n <= MBXC_VFS_PATH_MAX);
  CHECK(out[0] == '/');
  CHECK(n == 1 || out[n - 1] != '/');
  CHECK(strstr(out, "//") == NULL);
  for (const char *p = out; (p = strchr(p, '/')) != NULL; p++) {
    CHECK(strncmp(p, "/./", 3) != 0 && strcmp(p, "/.") != 0);
    CHECK(strncmp(p, "/../", 4) != 0 && strcmp(p, "/..") != 0);
  }
  size_t n2;
  CHECK(mbxC_vfs_normalize(out, n, again, sizeof again, &n2) == 0);
  CHECK(n2 == n && memcmp(out, again, n) == 0);
  CHECK(mbxC_vfs_is_canonical(out, n));
  CHECK(model(in, len, ref, sizeof ref) == 0 && strcmp(ref, out) == 0);

  static const char *const mounts[] = {"/data", "/data/sub", "/w", "/tmpx"};
  size_t off = 0;
  int m = mbxC_vfs_match(mounts, 4, out, n, &off);
  for (int i = 0; i < 4; i++) {
    size_t pl = strlen(mounts[i]);
    int cov = pl <= n && memcmp(mounts[i], out, pl) == 0 && (pl == n || out[pl] == '/');
    if (cov) CHECK(m >= 0 && strlen(mounts[m]) >= pl);
  }
  if (m >= 0) {
    size_t pl = strlen(mounts[m]);
    CHECK(memcmp(out, mounts[m], pl) == 0);
    if (off == n) {
      CHECK(n == pl);
    } else {
      CHECK(off == pl + 1 && out[pl] == '/');
      const char *rest = out + off;
      CHECK(rest[0] != '/' && strcmp(rest, "..") != 0 && strncmp(rest, "../", 3) != 0);
      CHECK(strstr(rest, "/../") == NULL);
    }
  }
  return 0;
}
