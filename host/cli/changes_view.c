/* host/cli/changes_view.c -- --changes, --export-changes and --diff: the change set walked
   through the public API (mbx_sandbox_changes_each), shown to a person or written out. */
#include "host/cli/changes_view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/error.h"
#include "host/cli/diff.h"

static const char *const kind_names[] = {"", "created", "modified", "removed", "renamed"};

/* The library's own failures (busy, out of memory) name the function; the CLI's messages name
   the option instead ("--diff: ..."). */
#define EACH_PREFIX "mbx_sandbox_changes_each: "

/*
** Walks the change set for the view named view. A stop by fn (it returned nonzero after
** filling *why) returns MBX_INTERNAL_ERROR with *why in err; the walk's own failures keep
** their status, told with the view's name.
*/
static mbx_status walk(mbx_sandbox *sb, const char *view, mbx_change_fn fn, void *ud,
                       const mbx_error *why, mbx_error *err) {
  mbx_error e;
  memset(&e, 0, sizeof e);
  mbx_status s = mbx_sandbox_changes_each(sb, fn, ud, &e);
  if (s == MBX_OK) return MBX_OK;
  if (s == MBX_INTERRUPTED) {
    if (err) *err = *why;
    return MBX_INTERNAL_ERROR;
  }
  const char *message = e.message;
  if (strncmp(message, EACH_PREFIX, strlen(EACH_PREFIX)) == 0) message += strlen(EACH_PREFIX);
  mbxU_error_set(err, s, "%s: %s", view, message);
  return s;
}

/* A guest path as printed for a person: bytes below 0x20, 0x7f and backslashes as \xHH, so
   a file named "a\nmoonbox: removed  README" cannot forge a line of the summary, or a header
   or hunk line of the diff (the JSON forms escape by themselves). */
static void put_printable(void (*put)(void *, const char *, size_t), void *to, const char *path) {
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (*p < 0x20 || *p == 0x7f || *p == '\\') {
      char hex[5];
      snprintf(hex, sizeof hex, "\\x%02x", *p);
      put(to, hex, 4);
    } else {
      put(to, (const char *)p, 1);
    }
  }
}

static void file_sink(void *file, const char *p, size_t n) {
  fwrite(p, 1, n, file);
}

/* path, printable, as a NUL-terminated string in b. */
static const char *printable(mbxU_buf *b, const char *path) {
  put_printable(mbxU_buf_sink, b, path);
  mbxU_buf_put(b, "", 0);
  return b->data;
}

/* ---- --changes: one line per change ---- */

static int print_summary(void *ud, const mbx_change *c) {
  FILE *out = ud;
  fprintf(out, "moonbox: %-8s ", kind_names[c->kind]);
  put_printable(file_sink, out, c->path);
  if (c->from) {
    fputs(" (from ", out);
    put_printable(file_sink, out, c->from);
    fputc(')', out);
  }
  if (c->is_dir)
    fputs(" (directory)", out);
  else if (c->kind != MBX_CHANGE_REMOVED)
    fprintf(out, " (%zu bytes)", c->len);
  fputc('\n', out);
  return 0;
}

mbx_status mbxH_cli_changes_summary(mbx_sandbox *sb, FILE *out, int framed, mbx_error *err) {
  mbx_error none; /* print_summary never stops the walk */
  memset(&none, 0, sizeof none);
  if (framed) {
    /* The script printed all it will before this line, and cannot know its nonce (drawn
       now, after the run): a line it printed that looks like a change is above it. */
    unsigned char nonce[8] = {0};
    if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
      memset(nonce, 0, sizeof nonce); /* the frame still holds: the script's output is above */
    fputs("moonbox: ---- changes ", out);
    for (size_t i = 0; i < sizeof nonce; i++)
      fprintf(out, "%02x", nonce[i]);
    fputs(" (the script's output ends above this line) ----\n", out);
  }
  return walk(sb, "--changes", print_summary, out, &none, err);
}

/* ---- --export-changes ---- */

typedef struct exporter {
  int dirfd;
  mbx_error why;
} exporter;

/* Make the directories of path (virtual, absolute) below the export directory; the last
   component too when is_dir. Returns the fd of the parent (or -1). */
static int export_dirs(exporter *x, const char *path, int is_dir, const char **name) {
  int fd = dup(x->dirfd);
  const char *p = path + 1;
  char part[256];
  for (;;) {
    const char *slash = strchr(p, '/');
    if (slash == NULL && !is_dir) {
      *name = p;
      return fd;
    }
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    memcpy(part, p, n);
    part[n] = '\0';
    if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) break;
    int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    if (next < 0) return -1;
    fd = next;
    if (slash == NULL) {
      *name = NULL;
      return fd;
    }
    p = slash + 1;
  }
  close(fd);
  return -1;
}

static int export_one(void *ud, const mbx_change *c) {
  exporter *x = ud;
  if (c->kind == MBX_CHANGE_REMOVED) return 0; /* in the manifest */
  const char *name;
  int fd = export_dirs(x, c->path, c->is_dir, &name);
  if (fd < 0) {
    mbxU_error_set(&x->why, MBX_INVALID_ARGUMENT,
                   "--export-changes: cannot make the directory "
                   "for %s: %s",
                   c->path, strerror(errno));
    return -1;
  }
  if (c->is_dir) {
    close(fd);
    return 0;
  }
  int f = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  int saved = errno;
  close(fd);
  size_t done = 0;
  while (f >= 0 && done < c->len) {
    ssize_t k = write(f, c->data + done, c->len - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    done += (size_t)k;
  }
  if (f < 0 || done < c->len) {
    if (f >= 0) saved = errno;
    mbxU_error_set(&x->why, MBX_INVALID_ARGUMENT, "--export-changes: cannot write %s: %s", c->path,
                   strerror(saved));
    if (f >= 0) close(f);
    return -1;
  }
  close(f);
  return 0;
}

mbx_status mbxH_cli_changes_export(mbx_sandbox *sb, const char *dir, mbx_error *err) {
  /* A new directory (or an empty one): nothing already there is overwritten or followed. */
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "--export-changes: cannot make %s: %s", dir,
                   strerror(errno));
    return MBX_INVALID_ARGUMENT;
  }
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "--export-changes: cannot open %s: %s", dir,
                   strerror(errno));
    return MBX_INVALID_ARGUMENT;
  }
  struct stat st;
  if (fstatat(dirfd, ".moonbox-changes.json", &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
    close(dirfd);
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "--export-changes: %s already holds an export "
                   "(give a new directory)",
                   dir);
    return MBX_INVALID_ARGUMENT;
  }
  exporter x = {.dirfd = dirfd};
  mbx_status s = walk(sb, "--export-changes", export_one, &x, &x.why, err);
  char *json = NULL;
  size_t len = 0;
  if (s == MBX_OK) s = mbx_sandbox_changes(sb, 0, &json, &len, err);
  if (s == MBX_OK) {
    int f = openat(dirfd, ".moonbox-changes.json",
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0 || write(f, json, len) != (ssize_t)len || write(f, "\n", 1) != 1) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "--export-changes: cannot write the manifest: "
                     "%s",
                     strerror(errno));
      s = MBX_INVALID_ARGUMENT;
    }
    if (f >= 0) close(f);
  }
  mbx_free(json);
  close(dirfd);
  return s;
}

/* ---- --diff ---- */

typedef struct differ {
  mbx_sandbox *sb;
  FILE *out;
  const mbxH_cli_diff_limits *lim;
  mbxH_cli_diff_report *rep;
  mbx_error why;
} differ;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t out_left(const differ *d) {
  return d->rep->printed < d->lim->max_out ? d->lim->max_out - d->rep->printed : 0;
}

static void file_put(void *file, const char *p, size_t n) {
  fwrite(p, 1, n, file);
}

/* "Files A and B differ (why)": a file named instead of shown, as diff(1) names binaries
   (patch(1) skips the line). Counted against the cap too: past it, only counted. */
static void name_only(differ *d, const char *a, const char *b, const char *why) {
  /* The reason may name a path (a hard link's first one): escaped as the labels are, so no
     name in it starts a line of the diff. */
  mbxU_buf reason = {0};
  const char *shown = printable(&reason, why);
  int n = reason.failed ? -1 : snprintf(NULL, 0, "Files %s and %s differ (%s)\n", a, b, shown);
  d->rep->not_shown++;
  if (n < 0 || (uint64_t)n > out_left(d)) {
    d->rep->not_named++;
  } else {
    fprintf(d->out, "Files %s and %s differ (%s)\n", a, b, shown);
    d->rep->printed += (uint64_t)n;
  }
  mbxU_buf_free(&reason);
}

static int diff_one(void *ud, const mbx_change *c) {
  differ *d = ud;
  const mbxH_cli_diff_limits *lim = d->lim;
  if (c->is_dir) return 0;
  const char *orig_path = c->kind == MBX_CHANGE_RENAMED ? c->from : c->path;
  int gone = c->kind == MBX_CHANGE_REMOVED, made = c->kind == MBX_CHANGE_CREATED;
  mbxU_buf label_a = {0}, label_b = {0};
  printable(&label_a, orig_path);
  printable(&label_b, c->path);
  if (label_a.failed || label_b.failed) {
    mbxU_buf_free(&label_a);
    mbxU_buf_free(&label_b);
    mbxU_error_set(&d->why, MBX_NO_MEMORY, "--diff: out of host memory for %s", c->path);
    return -1;
  }
  const char *la = made ? "/dev/null" : label_a.data, *lb = gone ? "/dev/null" : label_b.data;
  char why[320];
  char *orig = NULL;
  size_t orig_len = 0;
  int failed = 0;
  why[0] = '\0';
  if (lim->deadline_ns && now_ns() >= lim->deadline_ns) {
    snprintf(why, sizeof why, "not compared: --diff ran out of time (--timeout)");
    d->rep->timed_out++;
  } else if (!made) {
    /* What an original may cost: one at a time, within the memory budget, and within what
       is left of the read budget; a removal's (or an emptied file's) diff holds every byte
       of it, so it must fit what is left of the output too. Larger ones are refused before
       a byte is read. */
    uint64_t read_left = lim->max_read > d->rep->read ? lim->max_read - d->rep->read : 0;
    uint64_t max = lim->max_original;
    const char *cap = "its size is past what --diff reads of one file (--memory / 4)";
    if (read_left < max) {
      max = read_left;
      cap = "--diff has read its cap of originals (4 x --memory)";
    }
    if ((gone || c->len == 0) && out_left(d) < max) {
      max = out_left(d);
      cap = "its diff is longer than what is left of --diff-limit";
    }
    mbx_error e;
    memset(&e, 0, sizeof e);
    mbx_status s = mbx_sandbox_change_original(d->sb, c, max, &orig, &orig_len, &e);
    if (s == MBX_NO_MEMORY) {
      failed = 1;
    } else if (s != MBX_OK && strncmp(e.message, "File too large", 14) == 0) {
      snprintf(why, sizeof why, "not shown: %s", cap);
    } else if (s != MBX_OK) {
      snprintf(why, sizeof why, "the original cannot be read: %s", e.message);
    } else {
      d->rep->read += orig_len;
    }
  }
  if (!failed && why[0] == '\0') {
    mbxH_diff_limits dl = {.max_out = out_left(d), .max_memory = lim->max_memory};
    uint64_t size = 0;
    int rc = mbxH_diff_stream(la, orig, orig_len, lb, gone ? NULL : c->data, gone ? 0 : c->len, &dl,
                              file_put, d->out, &size);
    if (rc == MBXH_DIFF_NO_MEMORY)
      failed = 1;
    else if (rc == MBXH_DIFF_TOO_LARGE)
      snprintf(why, sizeof why, "not shown: a diff of %llu bytes, past --diff-limit",
               (unsigned long long)size);
    else if (rc == MBXH_DIFF_TOO_MANY_LINES)
      snprintf(why, sizeof why, "more lines than --diff compares");
    else
      d->rep->printed += size;
  }
  if (!failed && why[0]) name_only(d, la, lb, why);
  mbx_free(orig);
  mbxU_buf_free(&label_a);
  mbxU_buf_free(&label_b);
  if (failed) {
    mbxU_error_set(&d->why, MBX_NO_MEMORY, "--diff: out of host memory for %s", c->path);
    return -1;
  }
  return ferror(d->out) ? -1 : 0;
}

mbx_status mbxH_cli_changes_diff(mbx_sandbox *sb, FILE *out, const mbxH_cli_diff_limits *lim,
                                 mbxH_cli_diff_report *rep, mbx_error *err) {
  differ d = {.sb = sb, .out = out, .lim = lim, .rep = rep};
  memset(rep, 0, sizeof *rep);
  mbxU_error_set(&d.why, MBX_INVALID_ARGUMENT, "--diff: cannot write the diff");
  return walk(sb, "--diff", diff_one, &d, &d.why, err);
}

/* ---- after a run: where each view goes ---- */

int mbxH_cli_open_report(const char *option, const char *path, FILE **f) {
  *f = NULL;
  if (path == NULL) return 0;
  /* No link followed, nothing but a regular file written (a FIFO would block, a device
     is not a report), truncated only once it is known to be one. */
  int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fprintf(stderr, "moonbox: %s=%s: not a regular file\n", option, path);
    return -1;
  }
  if (fd < 0 || ftruncate(fd, 0) != 0 || (*f = fdopen(fd, "w")) == NULL) {
    fprintf(stderr, "moonbox: %s=%s: %s\n", option, path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return 0;
}

/* The bounds of --diff, from the run's own limits (docs/cli.md says which). */
static void diff_limits(const mbxH_cli_options *opt, const mbx_policy *p,
                        mbxH_cli_diff_limits *lim) {
  uint64_t memory = mbx_policy_get_limit(p, MBX_LIMIT_MEMORY);
  uint64_t timeout_ms = mbx_policy_get_limit(p, MBX_LIMIT_TIME_MS);
  lim->max_out =
      opt->diff_limit.set ? opt->diff_limit.value : mbx_policy_get_limit(p, MBX_LIMIT_OUTPUT);
  lim->max_original = memory / 4;
  lim->max_read = memory > UINT64_MAX / 4 ? UINT64_MAX : memory * 4;
  lim->max_memory = memory / 2;
  /* Half the run's own time, from now: a run and its diff end within 1.5 x --timeout (and
     one file's work, bounded by its bytes). */
  lim->deadline_ns = timeout_ms ? now_ns() + timeout_ms * 500000u : 0;
}

mbx_status mbxH_cli_show_changes(const mbxH_cli_options *opt, const mbx_policy *p, mbx_sandbox *sb,
                                 int err_open, FILE *diff_out, FILE *changes_out, mbx_error *err) {
  if (!opt->diff && !opt->export_changes && !(opt->changes && !opt->json)) return MBX_OK;
  /* The guest's heap goes first (its pages back to the OS), its files stay: the host's
     reads of originals never sit on top of a full guest heap. In a worker the heap is the
     worker's, and a reset there would only start another one. */
  mbx_status s = opt->isolate ? MBX_OK : mbx_sandbox_reset_keep_files(sb, err);
  if (s != MBX_OK) return s;
  if (opt->changes && !opt->json) {
    FILE *out = changes_out ? changes_out : stderr;
    if (out == stderr && err_open) fputc('\n', stderr); /* never glued to the script's line */
    s = mbxH_cli_changes_summary(sb, out, out == stderr, err);
    if (s != MBX_OK) return s;
  }
  if (opt->diff) {
    mbxH_cli_diff_limits lim;
    mbxH_cli_diff_report rep;
    diff_limits(opt, p, &lim);
    FILE *out = diff_out ? diff_out : stdout;
    s = mbxH_cli_changes_diff(sb, out, &lim, &rep, err);
    fflush(out);
    if (s != MBX_OK) return s;
    if (rep.not_shown) {
      fprintf(stderr,
              "moonbox: --diff: %zu changed file%s named, not shown (%llu bytes printed, "
              "--diff-limit %llu; %llu bytes of originals read)",
              rep.not_shown, rep.not_shown == 1 ? "" : "s", (unsigned long long)rep.printed,
              (unsigned long long)lim.max_out, (unsigned long long)rep.read);
      if (rep.timed_out) fprintf(stderr, "; %zu past the deadline (--timeout)", rep.timed_out);
      if (rep.not_named) fprintf(stderr, "; %zu not even named (see --changes)", rep.not_named);
      fputc('\n', stderr);
    }
  }
  if (opt->export_changes) s = mbxH_cli_changes_export(sb, opt->export_changes, err);
  return s;
}
