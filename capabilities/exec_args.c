/* capabilities/exec_args.c -- the exec backend's bwrap argument list: the image (the host's
   /usr layout), the namespaces, the mount tree and the environment of one planned run
   (exec.h). */
#include "capabilities/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bytes.h"

/* ---- string lists ---- */

int mbxC_strlist_push(mbxC_strlist *l, const char *s) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    char **grown = realloc(l->items, cap * sizeof *grown);
    if (grown == NULL) return -1;
    l->items = grown;
    l->cap = cap;
  }
  char *copy = mbxU_dup_bytes(s, strlen(s));
  if (copy == NULL) return -1;
  l->items[l->count++] = copy;
  return 0;
}

void mbxC_strlist_free(mbxC_strlist *l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}

/* ---- the argument list ---- */

const char *const mbxC_exec_image_names[6] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32"};

void mbxC_exec_image_probe(mbxC_exec_image *img) {
  memset(img, 0, sizeof *img);
  for (int i = 0; i < 6; i++) {
    char path[16];
    snprintf(path, sizeof path, "/%s", mbxC_exec_image_names[i]);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(path, img->links[i], sizeof img->links[i] - 1);
      /* Only a link into /usr is followed: anything else is left out of the image. */
      if (n <= 0 ||
          (strncmp(img->links[i], "usr/", 4) != 0 && strncmp(img->links[i], "/usr/", 5) != 0))
        img->links[i][0] = '\0';
      else
        img->links[i][n] = '\0';
    } else if (S_ISDIR(st.st_mode)) {
      img->dirs[i] = 1;
    }
  }
}

#define PUSH(s)                                                                                    \
  do {                                                                                             \
    if (mbxC_strlist_push(out, (s)) != 0) goto oom;                                                \
  } while (0)

int mbxC_exec_build_args(const mbxC_exec_plan *plan, const mbxC_exec_image *img, mbxC_strlist *out,
                         size_t *command_at) {
  char num[64];
  /* Namespaces one by one (bwrap 0.8 rejects --unshare-all with --userns); the user
     namespace bwrap makes itself, as the unprivileged host uid the helper switched to. No
     network namespace is ever shared: the process sees only lo. The shim is the pid
     namespace's pid 1 (--as-pid-1): bwrap's own pid 1 reports the program's end to bwrap's
     monitor, which then exits without reaping it, so every run left that pid 1 a zombie of
     the run's uid under the host's init, still counted by the uid's RLIMIT_NPROC after the
     uid was given back. The monitor reaps the shim, and the shim's exit ends the
     namespace. */
  static const char *const fixed[] = {
      "--unshare-user",    "--disable-userns", "--unshare-ipc", "--unshare-pid",
      "--as-pid-1",        "--unshare-net",    "--unshare-uts", "--unshare-cgroup-try",
      "--die-with-parent", "--new-session",    "--cap-drop",    "ALL",
      "--hostname",        "moonbox",          "--clearenv",    NULL};
  for (size_t i = 0; fixed[i]; i++)
    PUSH(fixed[i]);
  /* The image: /usr read-only, the merged-/usr links (or real directories) beside it. */
  PUSH("--ro-bind");
  PUSH("/usr");
  PUSH("/usr");
  for (int i = 0; i < 6; i++) {
    char dest[16];
    snprintf(dest, sizeof dest, "/%s", mbxC_exec_image_names[i]);
    if (img->links[i][0]) {
      PUSH("--symlink");
      PUSH(img->links[i]);
      PUSH(dest);
    } else if (img->dirs[i]) {
      PUSH("--ro-bind");
      PUSH(dest);
      PUSH(dest);
    }
  }
  /* A fresh procfs of the new pid namespace (bwrap covers /proc/sys and the other writable
     kernel knobs read-only), a minimal /dev, a private size-capped /tmp. */
  PUSH("--proc");
  PUSH("/proc");
  PUSH("--dev");
  PUSH("/dev");
  /* bwrap's /dev is a tmpfs without a size (half the host's RAM) that the process may fill:
     /dev/shm gets the /tmp cap, and the rest of /dev is made read-only. */
  PUSH("--size");
  snprintf(num, sizeof num, "%llu", (unsigned long long)(plan->tmp_bytes ? plan->tmp_bytes : 1));
  PUSH(num);
  PUSH("--tmpfs");
  PUSH("/dev/shm");
  PUSH("--remount-ro");
  PUSH("/dev");
  PUSH("--perms");
  PUSH("1777");
  PUSH("--size");
  snprintf(num, sizeof num, "%llu",
           (unsigned long long)(plan->tmp_bytes ? plan->tmp_bytes + plan->tmp_slack : 1));
  PUSH(num);
  PUSH("--tmpfs");
  PUSH("/tmp");
  /* The policy's host mounts at their virtual paths, through the view's held dirfds: bwrap
     0.8 has no --bind-fd, and a host path would be resolved again by name (following
     symlinks) at each run. */
  for (size_t i = 0; i < plan->mount_count; i++) {
    char src[64];
    if ((plan->mounts[i].mode == MBXC_MOUNT_OVERLAY || plan->mounts[i].mode == MBXC_MOUNT_RW) &&
        plan->copy) {
      /* An overlay or rw mount is a tmpfs the shim fills with the view's copy (exec_copy.h):
         the host directory is never bound, so nothing the process does reaches it but what
         the view applies afterwards, within its quotas. */
      PUSH("--perms");
      PUSH("0755");
      PUSH("--size");
      snprintf(num, sizeof num, "%llu", (unsigned long long)plan->overlay_bytes);
      PUSH(num);
      PUSH("--tmpfs");
      PUSH(plan->mounts[i].path);
      continue;
    }
    snprintf(src, sizeof src, "/proc/self/fd/%d", MBXC_EXEC_FIRST_MOUNT_FD + (int)i);
    PUSH(plan->mounts[i].mode == MBXC_MOUNT_RW ? "--bind" : "--ro-bind");
    PUSH(src);
    PUSH(plan->mounts[i].path);
  }
  /* (The shim at MBXC_EXEC_SHIM, which closes every inherited fd above 2 before the program
     starts, is copied in by the helper: host/exec/helper.c.) */
  PUSH("--remount-ro");
  PUSH("/");
  PUSH("--setenv");
  PUSH("PATH");
  PUSH("/usr/local/bin:/usr/bin:/bin");
  PUSH("--setenv");
  PUSH("HOME");
  PUSH("/tmp");
  PUSH("--setenv");
  PUSH("LANG");
  PUSH("C.UTF-8");
  for (size_t i = 0; i < plan->envc; i++) {
    const char *eq = strchr(plan->env[i], '=');
    if (eq == NULL) continue;
    char *name = mbxU_dup_bytes(plan->env[i], (size_t)(eq - plan->env[i]));
    if (name == NULL) goto oom;
    int r = mbxC_strlist_push(out, "--setenv") | mbxC_strlist_push(out, name) |
            mbxC_strlist_push(out, eq + 1);
    free(name);
    if (r != 0) goto oom;
  }
  PUSH("--chdir");
  PUSH(plan->cwd ? plan->cwd : "/tmp");
  *command_at = out->count;
  PUSH("--");
  PUSH(MBXC_EXEC_SHIM);
  PUSH("--shim");
  PUSH(plan->program);
  for (size_t i = 0; i < plan->argc; i++)
    PUSH(plan->argv[i]);
  return 0;
oom:
  return -1;
}
#undef PUSH
