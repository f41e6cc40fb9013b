/* capabilities/exec_cgroup.c -- the exec backend's per-run cgroups (exec_cgroup.h): locating
   each controller, making a run's cgroups, killing through them, reading what the limits did,
   removing them. */
#include "capabilities/exec_cgroup.h"
#include "capabilities/exec_uid.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- small file helpers (cgroup files are short text) ---- */

static int write_text(const char *dir, const char *file, const char *text) {
  char path[MBXC_CG_PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t n = strlen(text);
  ssize_t w = write(fd, text, n);
  int err = errno;
  close(fd);
  if (w != (ssize_t)n) {
    errno = w < 0 ? err : EIO;
    return -1;
  }
  return 0;
}

/* The first size-1 bytes of dir/file, NUL-terminated; -1 when it cannot be read. */
static ssize_t read_text(const char *dir, const char *file, char *buf, size_t size) {
  char path[MBXC_CG_PATH_MAX + 64];
  if (file)
    snprintf(path, sizeof path, "%s/%s", dir, file);
  else
    snprintf(path, sizeof path, "%s", dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len < size - 1) {
    ssize_t n = read(fd, buf + len, size - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

static int has_file(const char *dir, const char *file) {
  char path[MBXC_CG_PATH_MAX + 64];
  if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) return 0;
  return access(path, F_OK) == 0;
}

/* word is one of the sep-separated words of list[0..len). */
static int has_word(const char *list, size_t len, const char *word, char sep) {
  size_t wl = strlen(word);
  const char *p = list, *end = list + len;
  while (p < end) {
    const char *q = memchr(p, sep, (size_t)(end - p));
    if (q == NULL) q = end;
    if ((size_t)(q - p) == wl && memcmp(p, word, wl) == 0) return 1;
    p = q + 1;
  }
  return 0;
}

/* The number after "key " on a line of text ("oom_kill 3"), or 0. */
static unsigned long long keyed_number(const char *text, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, key, kl) == 0 && p[kl] == ' ') return strtoull(p + kl + 1, NULL, 10);
  return 0;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- locating ---- */

#define WHY(...)                                                                                   \
  do {                                                                                             \
    snprintf(why, why_size, __VA_ARGS__);                                                          \
    return 0;                                                                                      \
  } while (0)

int mbxC_cgroup_locate(const char *cgroup_text, const char *mountinfo_text, const char *controller,
                       char *out, size_t out_size, int *v2, char *why, size_t why_size) {
  /* /proc/self/cgroup: "ID:CONTROLLERS:PATH" per hierarchy; v2 is "0::PATH". */
  const char *path = NULL;
  size_t path_len = 0;
  for (const char *line = cgroup_text; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t ll = nl ? (size_t)(nl - line) : strlen(line);
    const char *c1 = memchr(line, ':', ll);
    const char *c2 = c1 ? memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - line)) : NULL;
    if (c2) {
      size_t cl = (size_t)(c2 - c1 - 1);
      int match = controller ? has_word(c1 + 1, cl, controller, ',')
                             : (cl == 0 && c1 - line == 1 && line[0] == '0');
      if (match) {
        path = c2 + 1;
        path_len = ll - (size_t)(c2 + 1 - line);
        break;
      }
    }
    line = nl ? nl + 1 : NULL;
  }
  if (path == NULL) {
    if (controller) WHY("no cgroup v1 hierarchy has the %s controller", controller);
    WHY("this process is in no cgroup v2 hierarchy");
  }
  if (path_len == 0 || path[0] != '/') WHY("our cgroup path is not absolute");
  /* /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPER". */
  for (const char *line = mountinfo_text; line && *line;) {
    const char *nl = strchr(line, '\n');
    size_t ll = nl ? (size_t)(nl - line) : strlen(line);
    char buf[1024];
    if (ll < sizeof buf) {
      memcpy(buf, line, ll);
      buf[ll] = '\0';
      char *f[6] = {0}, *save = NULL, *tok = strtok_r(buf, " ", &save);
      for (int i = 0; tok && i < 5; i++, tok = strtok_r(NULL, " ", &save))
        f[i] = tok;
      while (tok && strcmp(tok, "-") != 0)
        tok = strtok_r(NULL, " ", &save);
      char *fstype = tok ? strtok_r(NULL, " ", &save) : NULL;
      char *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
      char *super = source ? strtok_r(NULL, " ", &save) : NULL;
      int match = 0;
      if (f[4] && fstype) {
        if (controller)
          match = strcmp(fstype, "cgroup") == 0 && super &&
                  has_word(super, strlen(super), controller, ',');
        else
          match = strcmp(fstype, "cgroup2") == 0;
      }
      if (match) {
        const char *root = f[3], *mnt = f[4];
        if (strchr(root, '\\') || strchr(mnt, '\\'))
          WHY("the cgroup mount point holds an escaped character (%.100s)", mnt);
        /* Our path seen from the mount: the part below the mount's root. */
        size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
        if (rl &&
            (path_len < rl || memcmp(path, root, rl) != 0 || (path_len > rl && path[rl] != '/')))
          WHY("our %s cgroup (%.*s) is outside what its mount shows (%.100s)",
              controller ? controller : "v2", (int)(path_len < 100 ? path_len : 100), path, root);
        const char *rest = path + rl;
        size_t rest_len = path_len - rl;
        if (rest_len == 1 && rest[0] == '/') rest_len = 0;
        int n = snprintf(out, out_size, "%s%.*s", mnt, (int)rest_len, rest);
        if (n < 0 || (size_t)n >= out_size || (size_t)n + 40 >= MBXC_CG_PATH_MAX)
          WHY("our cgroup's path is too long");
        *v2 = controller == NULL;
        return 1;
      }
    }
    line = nl ? nl + 1 : NULL;
  }
  if (controller) WHY("the %s hierarchy is not mounted in this mount namespace", controller);
  WHY("no cgroup2 file system is mounted");
}

/* A child of dir can be made and has the file a job needs. 1, or 0 with why. */
static int try_child(const char *dir, const char *need, char *why, size_t why_size) {
  char child[MBXC_CG_PATH_MAX + 64];
  snprintf(child, sizeof child, "%s/moonbox-probe-%ld", dir, (long)getpid());
  if (mkdir(child, 0755) != 0 && errno != EEXIST)
    WHY("cannot make a cgroup under %.120s (%s)%s", dir, strerror(errno),
        errno == EACCES || errno == EPERM || errno == EROFS
            ? ": run as root or give moonbox a delegated cgroup"
            : "");
  int found = has_file(child, need);
  rmdir(child);
  if (!found) WHY("a cgroup under %.120s has no %s", dir, need);
  return 1;
}

static int read_proc(const char *path, char **text) {
  size_t cap = 1 << 16;
  *text = malloc(cap);
  if (*text == NULL) return -1;
  if (read_text(path, NULL, *text, cap) < 0) {
    free(*text);
    *text = NULL;
    return -1;
  }
  return 0;
}

void mbxC_cgroup_probe(mbxC_cgroup_setup *cg) {
  memset(cg, 0, sizeof *cg);
  char *cgt = NULL, *mi = NULL;
  if (read_proc("/proc/self/cgroup", &cgt) != 0 || read_proc("/proc/self/mountinfo", &mi) != 0) {
    for (int j = 0; j < MBXC_CG_JOBS; j++)
      snprintf(cg->why[j], sizeof cg->why[j], "/proc/self/cgroup or mountinfo cannot be read");
    free(cgt);
    free(mi);
    return;
  }
  char v2dir[MBXC_CG_PATH_MAX] = "", v2why[200] = "", sub[1024] = "";
  int is_v2 = 0;
  int have_v2 = mbxC_cgroup_locate(cgt, mi, NULL, v2dir, sizeof v2dir, &is_v2, v2why, sizeof v2why);
  if (have_v2) read_text(v2dir, "cgroup.subtree_control", sub, sizeof sub);
  static const char *const ctl[2] = {"memory", "pids"};
  static const char *const v1file[2] = {"memory.limit_in_bytes", "pids.max"};
  static const char *const v2file[2] = {"memory.max", "pids.max"};
  for (int j = 0; j < 2; j++) {
    char dir[MBXC_CG_PATH_MAX], why1[200] = "", why2[200] = "";
    int v = 0;
    if (mbxC_cgroup_locate(cgt, mi, ctl[j], dir, sizeof dir, &v, why1, sizeof why1)) {
      if (try_child(dir, v1file[j], why1, sizeof why1)) {
        snprintf(cg->parent[j], sizeof cg->parent[j], "%s", dir);
        continue;
      }
    }
    if (!have_v2) {
      snprintf(cg->why[j], sizeof cg->why[j], "%.199s; %.199s", why1, v2why);
      continue;
    }
    /* v2: the controller must already be enabled for our cgroup's children; enabling it
       would change the host's own cgroup, which is not ours to change. */
    if (!has_word(sub, strcspn(sub, "\n"), ctl[j], ' ')) {
      snprintf(cg->why[j], sizeof cg->why[j],
               "%.199s; the v2 cgroup %.80s does not delegate %s to its children "
               "(cgroup.subtree_control)",
               why1, v2dir, ctl[j]);
      continue;
    }
    if (!try_child(v2dir, v2file[j], why2, sizeof why2)) {
      snprintf(cg->why[j], sizeof cg->why[j], "%.199s", why2);
      continue;
    }
    snprintf(cg->parent[j], sizeof cg->parent[j], "%s", v2dir);
    cg->v2[j] = 1;
  }
  /* kill: cgroup.kill in a v2 child, else a v1 freezer. */
  char why_kill[200] = "";
  if (have_v2 && try_child(v2dir, "cgroup.kill", why_kill, sizeof why_kill)) {
    snprintf(cg->parent[MBXC_CG_KILL], sizeof cg->parent[MBXC_CG_KILL], "%s", v2dir);
    cg->v2[MBXC_CG_KILL] = 1;
  } else {
    char dir[MBXC_CG_PATH_MAX], why1[200] = "";
    int v = 0;
    if (mbxC_cgroup_locate(cgt, mi, "freezer", dir, sizeof dir, &v, why1, sizeof why1) &&
        try_child(dir, "freezer.state", why1, sizeof why1))
      snprintf(cg->parent[MBXC_CG_KILL], sizeof cg->parent[MBXC_CG_KILL], "%s", dir);
    else
      snprintf(cg->why[MBXC_CG_KILL], sizeof cg->why[MBXC_CG_KILL], "%.199s; %.199s",
               have_v2 ? why_kill : v2why, why1);
  }
  free(cgt);
  free(mi);
}

/* ---- one run ---- */

void mbxC_cgroup_run_create(const mbxC_cgroup_setup *cg, const char *name, uint64_t memory,
                            uint64_t pids, mbxC_cgroup_run *run) {
  memset(run, 0, sizeof *run);
  for (int j = 0; j < MBXC_CG_JOBS; j++) {
    if (cg->parent[j][0] == '\0') continue;
    char *dir = run->dir[j];
    int len = snprintf(dir, MBXC_CG_PATH_MAX, "%s/%s", cg->parent[j], name);
    if (len < 0 || len >= MBXC_CG_PATH_MAX) {
      dir[0] = '\0';
      continue;
    }
    run->v2[j] = cg->v2[j];
    for (int k = 0; k < j; k++)
      if (run->dir[k][0] && strcmp(run->dir[k], dir) == 0) run->shared[j] = 1;
    if (!run->shared[j] && mkdir(dir, 0755) != 0) {
      dir[0] = '\0';
      continue;
    }
    char num[32];
    int ok = 1;
    if (j == MBXC_CG_MEMORY) {
      snprintf(num, sizeof num, "%llu", (unsigned long long)memory);
      /* v1: the memory+swap limit too, or the process swaps past the limit instead of being
         killed (it can only be written after memory.limit_in_bytes). */
      ok = run->v2[j]
               ? write_text(dir, "memory.max", num) == 0 &&
                     (write_text(dir, "memory.swap.max", "0") == 0 || errno == ENOENT)
               : write_text(dir, "memory.limit_in_bytes", num) == 0 &&
                     (write_text(dir, "memory.memsw.limit_in_bytes", num) == 0 || errno == ENOENT);
    } else if (j == MBXC_CG_PIDS) {
      snprintf(num, sizeof num, "%llu", (unsigned long long)pids);
      ok = write_text(dir, "pids.max", num) == 0;
    }
    if (!ok) {
      if (!run->shared[j]) rmdir(dir);
      dir[0] = '\0';
    }
  }
}

const char *mbxC_cgroup_run_procs(const mbxC_cgroup_run *run, int i, char *buf, size_t size) {
  for (int j = 0; j < MBXC_CG_JOBS; j++) {
    if (run->dir[j][0] == '\0' || run->shared[j]) continue;
    if (i-- == 0) {
      snprintf(buf, size, "%s/cgroup.procs", run->dir[j]);
      return buf;
    }
  }
  return NULL;
}

void mbxC_cgroup_run_kill(const mbxC_cgroup_run *run) {
  const char *dir = run->dir[MBXC_CG_KILL];
  if (dir[0] == '\0') return;
  if (run->v2[MBXC_CG_KILL]) {
    write_text(dir, "cgroup.kill", "1");
    return;
  }
  /* v1 freezer: frozen members cannot fork or exit, so the list read below is the whole
     tree and no pid in it is reused before the SIGKILL lands; thawing lets them die. */
  if (write_text(dir, "freezer.state", "FROZEN") == 0) {
    char state[64];
    for (int i = 0; i < 500; i++) {
      if (read_text(dir, "freezer.state", state, sizeof state) < 0 ||
          strncmp(state, "FROZEN", 6) == 0)
        break;
      sleep_ms(1);
    }
  }
  char procs[8192];
  if (read_text(dir, "cgroup.procs", procs, sizeof procs) > 0)
    for (char *p = procs; *p;) {
      char *end;
      long pid = strtol(p, &end, 10);
      if (end == p) break;
      if (pid > 1) kill((pid_t)pid, SIGKILL);
      p = end;
      while (*p == '\n')
        p++;
    }
  write_text(dir, "freezer.state", "THAWED");
}

void mbxC_cgroup_run_outcome(const mbxC_cgroup_run *run, int *oom, int *pids_max) {
  char text[4096];
  *oom = *pids_max = 0;
  const char *m = run->dir[MBXC_CG_MEMORY];
  if (m[0] && read_text(m, run->v2[MBXC_CG_MEMORY] ? "memory.events" : "memory.oom_control", text,
                        sizeof text) > 0)
    *oom = keyed_number(text, "oom_kill") > 0;
  const char *p = run->dir[MBXC_CG_PIDS];
  if (p[0] && read_text(p, "pids.events", text, sizeof text) > 0)
    *pids_max = keyed_number(text, "max") > 0;
}

long mbxC_cgroup_run_count(const mbxC_cgroup_run *run) {
  /* Any of the run's cgroups holds every process of the run (the helper joined each before
     bwrap started); the kill job's is tried first: it is the one a run always gets when any. */
  static const int order[] = {MBXC_CG_KILL, MBXC_CG_MEMORY, MBXC_CG_PIDS};
  for (int k = 0; k < 3; k++) {
    const char *dir = run->dir[order[k]];
    if (dir[0] == '\0') continue;
    char path[MBXC_CG_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    long lines = 0;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
      for (ssize_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    close(fd);
    return lines;
  }
  return -1;
}

int mbxC_cgroup_run_remove(mbxC_cgroup_run *run) {
  int any = 0, left = 0;
  for (int j = 0; j < MBXC_CG_JOBS; j++)
    any |= run->dir[j][0] != '\0';
  if (!any) return 0;
  mbxC_cgroup_run_kill(run);
  /* Killed members leave their cgroups once they have exited; a bounded wait, not a spin. */
  for (int j = MBXC_CG_JOBS - 1; j >= 0; j--) {
    if (run->dir[j][0] == '\0') continue;
    if (!run->shared[j]) {
      int removed = 0;
      for (int i = 0; i < 440 && !removed; i++) {
        if (rmdir(run->dir[j]) == 0 || errno == ENOENT)
          removed = 1;
        else if (errno == EBUSY)
          sleep_ms(i < 50 ? 1 : 5);
        else
          break;
      }
      left += !removed;
    }
    run->dir[j][0] = '\0';
  }
  return left ? -1 : 0;
}

/* ---- owner records: stale cgroups of a dead host ---- */

int mbxC_cgroup_owner_open(mbxC_cgroup_owner *o, const char *dir) {
  memset(o, 0, sizeof *o);
  o->fd = -1;
  snprintf(o->dir, sizeof o->dir, "%s", dir);
  unsigned char raw[8];
  char why[256];
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) return -1;
  int dfd = mbxC_lock_dir_open(dir, why, sizeof why);
  if (dfd < 0) return -1;
  char token[17];
  for (int i = 0; i < 8; i++)
    snprintf(token + 2 * i, 3, "%02x", raw[i]);
  /* O_EXCL: a fresh record, never another owner's. */
  int fd = openat(dfd, token, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  close(dfd);
  if (fd < 0) return -1;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return -1;
  }
  o->fd = fd;
  memcpy(o->token, token, sizeof token);
  return 0;
}

void mbxC_cgroup_owner_close(mbxC_cgroup_owner *o) {
  if (o->fd < 0) return;
  char why[8];
  int dfd = mbxC_lock_dir_open(o->dir, why, sizeof why);
  if (dfd >= 0) {
    (void)unlinkat(dfd, o->token, 0);
    close(dfd);
  }
  close(o->fd);
  o->fd = -1;
  o->token[0] = '\0';
}

/* The token of a moonbox-<16 hex>-<digits> name, into token; 0 when name is not one. */
static int owned_name(const char *name, char token[17]) {
  if (strncmp(name, "moonbox-", 8) != 0) return 0;
  const char *t = name + 8;
  for (int i = 0; i < 16; i++)
    if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f'))) return 0;
  if (t[16] != '-' || t[17] < '0' || t[17] > '9') return 0;
  for (const char *d = t + 17; *d; d++)
    if (*d < '0' || *d > '9') return 0;
  memcpy(token, t, 16);
  token[16] = '\0';
  return 1;
}

/* 1 when the record of token exists in dfd and nobody holds it: its owner is dead. */
static int owner_dead(int dfd, const char *token) {
  int fd = openat(dfd, token, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0; /* no record: not ours to judge */
  int dead = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return dead;
}

int mbxC_cgroup_reap(const mbxC_cgroup_setup *cg, const char *dir, int *left) {
  char why[256];
  int removed = 0, stuck = 0;
  int dfd = mbxC_lock_dir_open(dir, why, sizeof why);
  if (dfd < 0) {
    if (left) *left = 0;
    return 0;
  }
  /* Tokens whose cgroups were all removed here: their records go too. */
  char gone[16][17];
  int ngone = 0;
  for (int j = 0; j < MBXC_CG_JOBS; j++) {
    const char *parent = cg->parent[j];
    int seen = 0;
    for (int k = 0; k < j; k++)
      seen |= strcmp(cg->parent[k], parent) == 0;
    if (parent[0] == '\0' || seen) continue;
    DIR *d = opendir(parent);
    if (d == NULL) continue;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      char token[17];
      if (de->d_type != DT_DIR || !owned_name(de->d_name, token) || !owner_dead(dfd, token))
        continue;
      char path[MBXC_CG_PATH_MAX], procs[64];
      int len = snprintf(path, sizeof path, "%.*s/%s", MBXC_CG_PATH_MAX - 64, parent, de->d_name);
      if (len < 0 || len >= (int)sizeof path) continue;
      /* Only an empty one: a process in it may be anyone's now (its owner is gone, and no
         kill of ours is sent on the word of a record). */
      if (read_text(path, "cgroup.procs", procs, sizeof procs) != 0 || rmdir(path) != 0) {
        stuck++;
        continue;
      }
      removed++;
      int known = 0;
      for (int g = 0; g < ngone; g++)
        known |= strcmp(gone[g], token) == 0;
      if (!known && ngone < 16) memcpy(gone[ngone++], token, sizeof token);
    }
    closedir(d);
  }
  /* A record goes once no hierarchy holds a cgroup of its token (a stuck one keeps it). */
  for (int g = 0; g < ngone; g++) {
    int still = 0;
    for (int j = 0; j < MBXC_CG_JOBS && !still; j++) {
      if (cg->parent[j][0] == '\0') continue;
      DIR *d = opendir(cg->parent[j]);
      struct dirent *de;
      while (d && (de = readdir(d)) != NULL) {
        char token[17];
        if (owned_name(de->d_name, token) && strcmp(token, gone[g]) == 0) still = 1;
      }
      if (d) closedir(d);
    }
    if (!still) (void)unlinkat(dfd, gone[g], 0);
  }
  close(dfd);
  if (left) *left = stuck;
  return removed;
}
