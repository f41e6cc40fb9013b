/* host/cli/main.c -- the moonbox command: runs one script in a sandbox and prints its outcome, or
   resumes a paused run from its snapshot. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "host/cli/changes_view.h"
#include "host/options/args.h"
#include "host/cli/fuzz.h"
#include "host/cli/repl.h"
#include "host/options/policy.h"
#include "host/mcp/http.h"
#include "host/mcp/mcp.h"
#include "moonbox.h"

/* Exit codes the CLI decides itself; run outcomes map through mbxH_cli_exit_code. */
enum { EXIT_USAGE = MBXH_CLI_EXIT_USAGE, EXIT_INTERNAL = MBXH_CLI_EXIT_INTERNAL };

/* The run gets its own thread and stack: mbx_run needs >= 1 MiB of free C stack, and the
   main thread's stack depends on `ulimit -s`, which the CLI does not control. */
#define RUN_STACK_SIZE ((size_t)8 * 1024 * 1024)

/* --input-file has no library limit; this only stops `--input-file /dev/zero` eating RAM. */
#define INPUT_FILE_MAX ((size_t)64 * 1024 * 1024)
/* A snapshot holds at most 256 MiB of log plus its header (capabilities/replay.h). */
#define SNAPSHOT_FILE_MAX ((size_t)257 * 1024 * 1024)

/* The sandbox a SIGINT should interrupt, NULL outside a run. Atomic (and lock-free on every
   platform we build for) so that the signal handler may read it. */
static _Atomic(mbx_sandbox *) running_sandbox;

typedef struct byte_buffer {
  char *data;
  size_t len;
} byte_buffer;

/* Everything the run thread needs, and what it hands back. */
typedef struct run_job {
  /* resume: restore the sandbox from the snapshot, then answer its pending call. */
  int resume;
  mbx_runtime *runtime;
  const mbx_policy *policy;
  const void *snapshot;
  size_t snapshot_len;
  const char *answer; /* --value JSON or --error MESSAGE */
  int answer_is_error;
  int not_paused;       /* resume: the snapshot was taken idle, nothing to answer */
  mbx_sandbox *sandbox; /* run: given; resume: set by the thread when restored */
  const char *code;
  size_t code_len;
  const char *chunk_name;
  const char *inputs;
  size_t inputs_len;
  mbx_result *result;
  mbx_status status;
  mbx_error err;
  FILE *diff_out, *changes_out; /* --diff=FILE, --changes=FILE (opened before the run) */
} run_job;

/* mbx_sandbox_interrupt sets an atomic flag in-process; in worker mode it takes a mutex, which
   this main thread (the only one SIGINT reaches: the run thread blocks it) never holds while it
   waits in pthread_join, so the handler cannot deadlock on it. The handler is installed with
   SA_RESETHAND, so a second Ctrl-C kills the process the ordinary way if the first one could
   not stop the script. */
static void on_sigint(int signo) {
  int saved_errno = errno;
  mbx_sandbox *sb = atomic_load(&running_sandbox);
  (void)signo;
  if (sb != NULL) (void)mbx_sandbox_interrupt(sb);
  errno = saved_errno;
}

static void *run_thread(void *arg) {
  run_job *job = arg;
  if (!job->resume) {
    job->status = mbx_run_named(job->sandbox, job->code, job->code_len, job->chunk_name,
                                job->inputs, job->inputs_len, &job->result, &job->err);
    return NULL;
  }
  /* The replay re-executes the recorded runs: it needs the big stack as much as a run. */
  job->sandbox =
      mbx_sandbox_restore(job->runtime, job->policy, job->snapshot, job->snapshot_len, &job->err);
  if (job->sandbox == NULL) {
    job->status = (mbx_status)job->err.code;
    return NULL;
  }
  if (!mbx_sandbox_paused(job->sandbox)) {
    job->not_paused = 1;
    job->status = MBX_INVALID_ARGUMENT;
    return NULL;
  }
  atomic_store(&running_sandbox, job->sandbox); /* Ctrl-C now interrupts the resumed run */
  if (job->answer_is_error)
    job->status =
        mbx_resume_error(job->sandbox, job->answer, strlen(job->answer), &job->result, &job->err);
  else
    job->status =
        mbx_resume(job->sandbox, job->answer, strlen(job->answer), &job->result, &job->err);
  return NULL;
}

/*
** Reads the whole stream, binary-safe, but never more than max + 1 bytes: *too_large is set
** when there was more than max. Returns 0, or -1 with errno set on a read error.
*/
static int read_stream(FILE *f, size_t max, byte_buffer *out, int *too_large) {
  size_t cap = 0;
  out->data = NULL;
  out->len = 0;
  *too_large = 0;
  for (;;) {
    size_t want, got;
    if (out->len == cap) {
      size_t next = cap == 0 ? 64 * 1024 : cap * 2;
      char *grown;
      if (next > max + 1) next = max + 1;
      if (next <= cap) {
        *too_large = 1;
        return 0;
      }
      grown = realloc(out->data, next);
      if (grown == NULL) {
        errno = ENOMEM;
        return -1;
      }
      out->data = grown;
      cap = next;
    }
    want = cap - out->len;
    got = fread(out->data + out->len, 1, want, f);
    out->len += got;
    if (got < want) {
      if (ferror(f)) return -1;
      if (out->len > max) *too_large = 1;
      return 0;
    }
  }
}

/* Reads PATH ("-" = stdin) into out. Prints the error and returns -1 on failure; *too_large
   as for read_stream. */
static int read_path(const char *path, size_t max, byte_buffer *out, int *too_large) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  int rc, saved_errno;
  if (f == NULL) {
    fprintf(stderr, "moonbox: cannot open '%s': %s\n", path, strerror(errno));
    return -1;
  }
  rc = read_stream(f, max, out, too_large);
  saved_errno = errno;
  if (f != stdin) fclose(f);
  if (rc != 0) {
    /* Reading a directory fails here (EISDIR), not at fopen. */
    fprintf(stderr, "moonbox: cannot read '%s': %s\n", strcmp(path, "-") == 0 ? "stdin" : path,
            strerror(saved_errno));
    free(out->data);
    out->data = NULL;
    return -1;
  }
  return 0;
}

/* Writes the traceback to stderr, each line indented, so that it reads as part of the error.
   Lua indents frames with a tab; two more spaces keep them under the "stack traceback:" line
   without mixing tabs and spaces. */
static void print_indented(const char *text, size_t len) {
  size_t start = 0;
  while (start < len) {
    const char *nl = memchr(text + start, '\n', len - start);
    size_t end = nl ? (size_t)(nl - text) : len;
    if (end > start) {
      fputs("  ", stderr);
      if (text[start] == '\t') {
        fputs("  ", stderr);
        start++;
      }
      fwrite(text + start, 1, end - start, stderr);
      fputc('\n', stderr);
    }
    start = end + 1;
  }
}

static void print_failure(const mbx_result *res) {
  mbx_error e;
  size_t tb_len = 0;
  const char *tb;
  char prefix[96];
  memset(&e, 0, sizeof e);
  (void)mbx_result_error(res, &e);
  if (e.message[0] == '\0')
    (void)snprintf(e.message, sizeof e.message, "%s", mbx_status_str(mbx_result_status(res)));
  if (e.line > 0 && e.chunk[0] != '\0') {
    (void)snprintf(prefix, sizeof prefix, "%s:%d: ", e.chunk, e.line);
    /* Do not repeat the position should the message already carry it. */
    if (strncmp(e.message, prefix, strlen(prefix)) == 0)
      fprintf(stderr, "moonbox: %s\n", e.message);
    else
      fprintf(stderr, "moonbox: %s%s\n", prefix, e.message);
  } else {
    fprintf(stderr, "moonbox: %s\n", e.message);
  }
  tb = mbx_result_traceback(res, &tb_len);
  if (tb != NULL && tb_len > 0) print_indented(tb, tb_len);
}

/* The exit code of a run: os.exit(N) exits with N, as the script would under lua(1). */
static int run_exit_code(const mbx_result *res) {
  int64_t code;
  if (mbx_result_exit_code(res, &code)) return mbxH_cli_exit_code_for_exit(code);
  return mbxH_cli_exit_code(mbx_result_status(res));
}

/* 1 when fds a and b are the same open file or terminal. */
static int same_file(int a, int b) {
  struct stat x, y;
  return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Prints the outcome of a run that happened; returns the exit code. changes (NULL: none) is
   the change set's JSON array, added to the --json object under "changes". out: where the
   script's stdout and value go (stdout, or stderr when stdout holds the diff alone);
   *err_open: set when the last byte printed on stderr was the script's and not a newline. */
static int print_result(const mbx_result *res, int json, const char *changes, FILE *out,
                        int *err_open) {
  mbx_status status = mbx_result_status(res);
  size_t len = 0;
  const char *text;
  if (json) {
    text = mbx_result_json(res, &len);
    if (text == NULL) {
      fputs("moonbox: out of memory while writing the result\n", stderr);
      return mbxH_cli_exit_code(MBX_NO_MEMORY);
    }
    if (changes && len > 1 && text[len - 1] == '}') {
      fwrite(text, 1, len - 1, stdout);
      fputs(",\"changes\":", stdout);
      fputs(changes, stdout);
      fputs("}", stdout);
    } else {
      fwrite(text, 1, len, stdout);
    }
    fputc('\n', stdout);
    return run_exit_code(res);
  }
  text = mbx_result_stdout(res, &len);
  if (len > 0) fwrite(text, 1, len, out);
  /* On one terminal (or file) the next line on stderr would continue the script's last line
     on stdout too. */
  int shared = out == stderr || same_file(fileno(stdout), fileno(stderr));
  if (len > 0 && shared) *err_open = text[len - 1] != '\n';
  text = mbx_result_stderr(res, &len);
  if (len > 0) {
    fflush(stdout); /* keep the two streams in order on a shared terminal */
    fwrite(text, 1, len, stderr);
    *err_open = text[len - 1] != '\n';
  }
  if (status == MBX_PAUSED) {
    /* Not a failure: say where the run stands, on stderr so that stdout stays the script's. */
    const char *fn, *args;
    size_t fn_len, args_len;
    text = mbx_result_json(res, &len);
    fflush(stdout);
    *err_open = 0;
    if (mbxH_cli_find_pending(text, len, &fn, &fn_len, &args, &args_len) == 0) {
      fputs("moonbox: paused at ", stderr);
      fwrite(fn, 1, fn_len, stderr);
      fputc('(', stderr);
      fwrite(args + 1, 1, args_len - 2, stderr); /* the array without its brackets */
      fputs(")\n", stderr);
    } else {
      fputs("moonbox: paused at an external call\n", stderr);
    }
  } else if (mbx_result_exit_code(res, NULL)) {
    /* os.exit(N) is the script's choice, not a failure to report: like lua(1), say nothing
       (the code, and the result JSON under --json, still tell). */
  } else if (status == MBX_OK) {
    text = mbx_result_value_json(res, &len);
    if (text != NULL && !(len == 4 && memcmp(text, "null", 4) == 0)) {
      if (shared) *err_open = 0;
      fwrite(text, 1, len, out);
      fputc('\n', out);
    }
  } else {
    fflush(stdout);
    *err_open = 0;
    print_failure(res);
  }
  return run_exit_code(res);
}

/*
** What lua(1) skips at the start of a file, so that scripts behave as they do there: a UTF-8
** byte order mark, then a first line starting with '#' (a "#!" line, which makes scripts
** executable). The newline stays, so line numbers in errors still match the file.
*/
static size_t skip_file_prefix(const char *code, size_t len) {
  size_t skip = 0;
  const char *nl;
  if (len >= 3 && memcmp(code, "\xEF\xBB\xBF", 3) == 0) skip = 3;
  if (skip == len || code[skip] != '#') return skip;
  nl = memchr(code + skip, '\n', len - skip);
  return nl ? (size_t)(nl - code) : len;
}

/* Starts the run on its own thread with SIGINT routed to the interrupt; returns 0 or -1. */
static int run_on_thread(run_job *job) {
  pthread_attr_t attr;
  pthread_t thread;
  struct sigaction action, old_action;
  sigset_t block, old_mask;
  int rc;

  memset(&action, 0, sizeof action);
  action.sa_handler = on_sigint;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  atomic_store(&running_sandbox, job->sandbox);
  sigaction(SIGINT, NULL, &old_action);
  /* An ignored SIGINT stays ignored: shells start background jobs that way so that Ctrl-C
     at the terminal does not reach them (and `nohup` relies on it too). */
  if (old_action.sa_handler != SIG_IGN) sigaction(SIGINT, &action, NULL);

  /* The run thread blocks SIGINT, so the handler always runs on the main thread while it
     waits in pthread_join: it can never race with the sandbox being freed below. */
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  rc = pthread_attr_init(&attr);
  if (rc == 0) {
    rc = pthread_attr_setstacksize(&attr, RUN_STACK_SIZE);
    if (rc == 0) rc = pthread_create(&thread, &attr, run_thread, job);
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  if (rc == 0) pthread_join(thread, NULL);

  atomic_store(&running_sandbox, NULL);
  sigaction(SIGINT, &old_action, NULL);
  if (rc != 0) {
    fprintf(stderr, "moonbox: cannot start the run thread: %s\n", strerror(rc));
    return -1;
  }
  return 0;
}

/*
** Writes the bytes to PATH atomically: PATH.tmp is written, flushed to disk and renamed over
** PATH, so a reader (or the next step of a shell chain) never sees half a snapshot, and a
** failed write leaves an earlier PATH as it was. Prints the error and returns -1 on failure.
*/
static int write_file_atomic(const char *path, const void *bytes, size_t len) {
  size_t path_len = strlen(path);
  char *tmp = malloc(path_len + 5);
  FILE *f;
  int ok;
  if (tmp == NULL) {
    fprintf(stderr, "moonbox: --snapshot-out: out of memory\n");
    return -1;
  }
  memcpy(tmp, path, path_len);
  memcpy(tmp + path_len, ".tmp", 5);
  /* A snapshot holds the bytes of every file the guest read (a 0600 file of a mount
     included), so it is the owner's alone: created 0600, and made 0600 if a leftover PATH.tmp
     of a crashed run had another mode (rename keeps the temporary file's mode). */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0 && fchmod(fd, 0600) != 0) {
    int saved_errno = errno;
    close(fd);
    fd = -1;
    errno = saved_errno;
  }
  f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (f == NULL) {
    fprintf(stderr, "moonbox: --snapshot-out: cannot create '%s': %s\n", tmp, strerror(errno));
    if (fd >= 0) close(fd);
    free(tmp);
    return -1;
  }
  ok = fwrite(bytes, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (!ok) {
    int saved_errno = errno;
    fclose(f);
    remove(tmp);
    fprintf(stderr, "moonbox: --snapshot-out: cannot write '%s': %s\n", tmp, strerror(saved_errno));
    free(tmp);
    return -1;
  }
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    int saved_errno = errno;
    remove(tmp);
    fprintf(stderr, "moonbox: --snapshot-out: cannot write '%s': %s\n", path,
            strerror(saved_errno));
    free(tmp);
    return -1;
  }
  free(tmp);
  return 0;
}

/* Snapshots the paused sandbox into opt->snapshot_out. Returns 0, or the exit code. */
static int save_snapshot(mbx_sandbox *sb, const char *path) {
  void *bytes = NULL;
  size_t len = 0;
  mbx_error err;
  mbx_status s;
  memset(&err, 0, sizeof err);
  s = mbx_sandbox_snapshot(sb, &bytes, &len, &err);
  if (s != MBX_OK) {
    fprintf(stderr, "moonbox: --snapshot-out: %s\n", err.message);
    return EXIT_INTERNAL;
  }
  if (write_file_atomic(path, bytes, len) != 0) {
    mbx_free(bytes);
    return EXIT_USAGE;
  }
  mbx_free(bytes);
  return 0;
}

/*
** After the run (or the resume) thread: reports an API status, or prints the result and,
** when the run paused and --snapshot-out was given, writes the snapshot. Returns the exit code.
*/
static int finish_job(const mbxH_cli_options *opt, run_job *job) {
  int exit_code;
  if (job->status >= MBX_API_ERROR_BASE) {
    /* No run happened: there is no result to print, with or without --json. */
    if (job->resume && job->status == MBX_INVALID_INPUT)
      fprintf(stderr, "moonbox: --value: %s\n", job->err.message);
    else if (job->status == MBX_INVALID_INPUT)
      fprintf(stderr, "moonbox: %s: %s\n", opt->input_file ? "--input-file" : "--input",
              job->err.message);
    else
      fprintf(stderr, "moonbox: %s\n", job->err.message);
    return mbxH_cli_exit_code(job->status);
  }
  char *changes = NULL;
  mbx_error cerr;
  if (opt->json && opt->changes &&
      mbx_sandbox_changes(job->sandbox, 0, &changes, NULL, &cerr) != MBX_OK) {
    fprintf(stderr, "moonbox: --changes: %s\n", cerr.message);
    return EXIT_INTERNAL;
  }
  /* A --diff on stdout holds nothing else (`moonbox run --diff | patch -p1` must never see
     a hunk the script printed): the script's stdout goes to stderr then. */
  int err_open = 0;
  FILE *out = opt->diff && !opt->diff_file && !opt->json ? stderr : stdout;
  exit_code = print_result(job->result, opt->json, changes, out, &err_open);
  mbx_free(changes);
  /* The snapshot first: the change set is read after the guest's heap is released. */
  if (job->status == MBX_PAUSED && opt->snapshot_out != NULL) {
    int rc = save_snapshot(job->sandbox, opt->snapshot_out);
    if (rc != 0) exit_code = rc;
  }
  fflush(stdout);
  mbx_status cs = mbxH_cli_show_changes(opt, job->policy, job->sandbox, err_open, job->diff_out,
                                        job->changes_out, &cerr);
  if (cs != MBX_OK) {
    fflush(stdout);
    fprintf(stderr, "moonbox: %s\n", cerr.message);
    return cs == MBX_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_INTERNAL;
  }
  return exit_code;
}

/* moonbox resume SNAPSHOT (--value JSON | --error MESSAGE) [OPTIONS] */
/* The runtime, isolated with --isolate process (the worker is found next to this binary). */
static mbx_runtime *new_runtime(const mbxH_cli_options *opt, mbx_error *err) {
  mbx_runtime *rt = mbx_runtime_new(err);
  if (rt &&
      ((opt->isolate &&
        mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, err) != MBX_OK) ||
       (opt->exec_uid_count &&
        mbx_runtime_set_exec_uids(rt, opt->exec_uid_first, opt->exec_uid_count, err) != MBX_OK))) {
    mbx_runtime_free(rt);
    return NULL;
  }
  return rt;
}

static int resume_command(const mbxH_cli_options *opt) {
  mbx_policy *policy = NULL;
  mbx_runtime *runtime = NULL;
  byte_buffer snap = {NULL, 0};
  const char *name = strcmp(opt->snapshot, "-") == 0 ? "stdin" : opt->snapshot;
  run_job job;
  mbx_error err;
  int too_large = 0, exit_code = EXIT_INTERNAL;

  memset(&job, 0, sizeof job);
  memset(&err, 0, sizeof err);
  policy = mbxH_cli_make_policy(opt, &exit_code);
  if (policy == NULL) goto done;
  if (read_path(opt->snapshot, SNAPSHOT_FILE_MAX, &snap, &too_large) != 0) {
    exit_code = EXIT_USAGE;
    goto done;
  }
  if (too_large || snap.len == 0) {
    fprintf(stderr, "moonbox: %s: %s (give a file moonbox run --snapshot-out wrote)\n", name,
            too_large ? "too large to be a snapshot" : "the snapshot file is empty");
    exit_code = EXIT_USAGE;
    goto done;
  }
  runtime = new_runtime(opt, &err);
  if (runtime == NULL) {
    fprintf(stderr, "moonbox: %s\n", err.message);
    goto done;
  }
  job.resume = 1;
  job.runtime = runtime;
  job.policy = policy;
  job.snapshot = snap.data;
  job.snapshot_len = snap.len;
  job.answer = opt->resume_value != NULL ? opt->resume_value : opt->resume_error;
  job.answer_is_error = opt->resume_value == NULL;
  if (run_on_thread(&job) != 0) goto done;

  if (job.sandbox == NULL) {
    /* The snapshot was refused: a damaged file, another build, another policy, a replay
       that went another way. */
    if (strstr(job.err.message, "mounts changed") != NULL)
      fprintf(stderr,
              "moonbox: %s: the snapshot was made under other mounts; resume needs the same "
              "--mount options as the run that wrote it (%s)\n",
              name, job.err.message);
    else if (strstr(job.err.message, "another policy") != NULL)
      fprintf(stderr,
              "moonbox: %s: the snapshot was made under other policy options; resume needs "
              "the same --memory, --instructions, --timeout, --output-limit, --source-limit, "
              "--seed, --time, --env and --pause-on as the run that wrote it (%s)\n",
              name, job.err.message);
    else
      fprintf(stderr, "moonbox: %s: not a usable snapshot: %s\n", name, job.err.message);
    exit_code = job.status == MBX_INVALID_INPUT ? EXIT_USAGE : mbxH_cli_exit_code(job.status);
    goto done;
  }
  if (job.not_paused) {
    fprintf(stderr,
            "moonbox: %s: the snapshot is not paused at an external call; there is nothing to "
            "answer with --value or --error\n",
            name);
    exit_code = EXIT_USAGE;
    goto done;
  }
  exit_code = finish_job(opt, &job);

done:
  mbx_result_free(job.result);
  mbx_sandbox_free(job.sandbox);
  mbx_runtime_free(runtime);
  mbx_policy_free(policy);
  free(snap.data);
  return exit_code;
}

/* The script of run and check (-e CODE, FILE or stdin), read no further than the policy's
   source limit allows, without the prefix lua(1) skips. Returns 0, or the exit code after
   printing why. */
static int load_script(const mbxH_cli_options *opt, const mbx_policy *policy, byte_buffer *script,
                       const char **code, size_t *code_len, char *chunk_name,
                       size_t chunk_name_size, const char **chunk) {
  int too_large = 0;
  size_t skip;
  if (opt->script_kind == MBXH_CLI_SCRIPT_CODE) {
    *code = opt->script;
    *code_len = strlen(opt->script);
    *chunk = "input";
    return 0;
  }
  uint64_t source_limit = mbx_policy_get_limit(policy, MBX_LIMIT_SOURCE);
  const char *path = opt->script_kind == MBXH_CLI_SCRIPT_STDIN ? "-" : opt->script;
  size_t max = source_limit < SIZE_MAX - 1 ? (size_t)source_limit : SIZE_MAX - 1;
  if (read_path(path, max, script, &too_large) != 0) return EXIT_USAGE;
  if (too_large) {
    fprintf(stderr,
            "moonbox: %s: the script is larger than the source limit of %llu bytes "
            "(raise it with --source-limit, up to 16M)\n",
            opt->script_kind == MBXH_CLI_SCRIPT_STDIN ? "stdin" : opt->script,
            (unsigned long long)source_limit);
    return mbxH_cli_exit_code(MBX_SOURCE_TOO_LARGE);
  }
  skip = skip_file_prefix(script->data, script->len);
  *code = script->data ? script->data + skip : ""; /* an empty file: realloc was never called */
  *code_len = script->len - skip;
  if (opt->script_kind == MBXH_CLI_SCRIPT_FILE) {
    mbxH_cli_chunk_name(opt->script, chunk_name, chunk_name_size);
    *chunk = chunk_name;
  } else {
    *chunk = "input";
  }
  return 0;
}

/* The --input text or the --input-file bytes (NULL when neither was given). Returns 0, or the
   exit code after printing why. */
static int load_inputs(const mbxH_cli_options *opt, byte_buffer *inputs, const char **text,
                       size_t *len) {
  int too_large = 0;
  *text = NULL;
  *len = 0;
  if (opt->input_json != NULL) {
    *text = opt->input_json;
    *len = strlen(opt->input_json);
  } else if (opt->input_file != NULL) {
    if (read_path(opt->input_file, INPUT_FILE_MAX, inputs, &too_large) != 0) return EXIT_USAGE;
    if (too_large || inputs->len == 0) {
      fprintf(stderr, "moonbox: --input-file: '%s' is %s (give a JSON object)\n", opt->input_file,
              too_large ? "larger than 64 MiB" : "empty");
      return EXIT_USAGE;
    }
    *text = inputs->data;
    *len = inputs->len;
  }
  return 0;
}

/*
** run FILE ARGS... and - ARGS...: the script arguments reach the library as the inputs key
** "..." (include/moonbox.h, mbx_run_named), merged into the --input object when there is one
** (a text that is not a JSON object is passed on unchanged, for the library's own message).
** arg[0] is the file's name: its path in the sandbox's view, where require and loadfile find
** it beside its modules ("./main.lua"); no host path reaches the guest. Returns 0 with
** *owned the new text (NULL when nothing was added), or EXIT_USAGE.
*/
static int add_script_args(const mbxH_cli_options *opt, const char **text, size_t *len,
                           char **owned) {
  *owned = NULL;
  if (opt->script_kind != MBXH_CLI_SCRIPT_FILE && opt->script_kind != MBXH_CLI_SCRIPT_STDIN)
    return 0;
  json_error_t jerr;
  json_t *obj = *text ? json_loadb(*text, *len, 0, &jerr) : json_object();
  if (obj == NULL || !json_is_object(obj)) {
    json_decref(obj);
    return 0;
  }
  json_t *args = json_array();
  const char *name = "-";
  if (opt->script_kind == MBXH_CLI_SCRIPT_FILE) {
    const char *slash = strrchr(opt->script, '/');
    name = slash ? slash + 1 : opt->script;
  }
  int bad = -1;
  for (int i = -1; args && i < opt->script_argc; i++) {
    json_t *s = json_string(i < 0 ? name : opt->script_args[i]);
    if (s == NULL || json_array_append_new(args, s) != 0) {
      bad = i;
      break;
    }
  }
  if (args == NULL || bad != -1 || json_object_set_new(obj, "...", args) != 0) {
    if (bad >= 0)
      fprintf(stderr, "moonbox: script argument %d is not valid UTF-8\n", bad + 1);
    else
      fprintf(stderr, "moonbox: the script's name is not valid UTF-8\n");
    json_decref(obj);
    return EXIT_USAGE;
  }
  *owned = json_dumps(obj, JSON_COMPACT);
  json_decref(obj);
  if (*owned == NULL) return EXIT_INTERNAL;
  *text = *owned;
  *len = strlen(*owned);
  return 0;
}

static int run_command(const mbxH_cli_options *opt) {
  mbx_policy *policy = NULL;
  mbx_runtime *runtime = NULL;
  mbx_sandbox *sandbox = NULL;
  byte_buffer script = {NULL, 0}, inputs = {NULL, 0};
  int guest_stdin_fd = -1; /* --stdin FILE's descriptor, closed after the sandbox */
  /* Lua keeps at most LUA_IDSIZE - 1 = 59 bytes of a chunk name in its messages, cutting
     the end (where the file name is); shortened here, the name loses its start instead. */
  char chunk_name[60];
  run_job job;
  mbx_error err;
  int exit_code = EXIT_INTERNAL;
  char *with_args = NULL; /* the inputs with the script arguments (jansson's) */

  memset(&job, 0, sizeof job);
  memset(&err, 0, sizeof err);
  policy = mbxH_cli_make_policy(opt, &exit_code);
  if (policy == NULL) goto done;

  /* Load everything before creating the sandbox: nothing is run until all inputs are known
     good. */
  exit_code = load_script(opt, policy, &script, &job.code, &job.code_len, chunk_name,
                          sizeof chunk_name, &job.chunk_name);
  if (exit_code != 0) goto done;
  exit_code = EXIT_INTERNAL;

  exit_code = load_inputs(opt, &inputs, &job.inputs, &job.inputs_len);
  if (exit_code != 0) goto done;
  exit_code = add_script_args(opt, &job.inputs, &job.inputs_len, &with_args);
  if (exit_code != 0) goto done;
  exit_code = EXIT_INTERNAL;

  runtime = new_runtime(opt, &err);
  if (runtime == NULL) {
    fprintf(stderr, "moonbox: %s\n", err.message);
    goto done;
  }
  sandbox = mbx_sandbox_new(runtime, policy, &err);
  if (sandbox == NULL) {
    fprintf(stderr, "moonbox: %s\n", err.message);
    goto done;
  }
  job.sandbox = sandbox;
  /* io.stdin: --stdin FILE, or this process's standard input unless the script or the inputs
     come from it. Read only as the script reads it (mbx_sandbox_set_stdin_fd): a script that
     never reads it never waits for it, and a wait counts against --timeout. */
  int stdin_fd = -1;
  struct stat in_st;
  if (opt->stdin_file != NULL && strcmp(opt->stdin_file, "-") != 0) {
    stdin_fd = guest_stdin_fd = open(opt->stdin_file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (stdin_fd < 0) {
      fprintf(stderr, "moonbox: --stdin: cannot open '%s': %s\n", opt->stdin_file, strerror(errno));
      exit_code = EXIT_USAGE;
      goto done;
    }
  } else if (opt->stdin_file != NULL || (opt->script_kind != MBXH_CLI_SCRIPT_STDIN &&
                                         !(opt->input_file && strcmp(opt->input_file, "-") == 0))) {
    if (fstat(0, &in_st) == 0) stdin_fd = 0;
  }
  if (stdin_fd >= 0) {
    mbx_status ss = mbx_sandbox_set_stdin_fd(sandbox, stdin_fd, &err);
    if (ss != MBX_OK) {
      fprintf(stderr, "moonbox: --stdin: %s\n", err.message);
      exit_code = ss == MBX_UNSUPPORTED ? EXIT_USAGE : EXIT_INTERNAL;
      goto done;
    }
  }
  /* The report files are opened before the script runs: it cannot plant a link there. */
  if (mbxH_cli_open_report("--diff", opt->diff_file, &job.diff_out) != 0 ||
      mbxH_cli_open_report("--changes", opt->changes_file, &job.changes_out) != 0) {
    exit_code = EXIT_USAGE;
    goto done;
  }
  job.policy = policy;
  if (run_on_thread(&job) != 0) goto done;
  exit_code = finish_job(opt, &job);

done:
  if (job.diff_out && fclose(job.diff_out) != 0 && exit_code == 0) exit_code = EXIT_INTERNAL;
  if (job.changes_out && fclose(job.changes_out) != 0 && exit_code == 0) exit_code = EXIT_INTERNAL;
  mbx_result_free(job.result);
  mbx_sandbox_free(sandbox);
  if (guest_stdin_fd >= 0) close(guest_stdin_fd);
  mbx_runtime_free(runtime);
  mbx_policy_free(policy);
  free(script.data);
  free(inputs.data);
  free(with_args);
  return exit_code;
}

/* ---------------------------------------------------------------------------------------- */
/* moonbox check: the static check (mbx_check) with this command line's policy.              */

typedef struct check_job {
  const mbx_policy *policy;
  const char *code;
  size_t code_len;
  char *json;
  size_t json_len;
  mbx_status status;
  mbx_error err;
} check_job;

static void *check_thread(void *arg) {
  check_job *job = arg;
  job->status =
      mbx_check(job->policy, job->code, job->code_len, &job->json, &job->json_len, &job->err);
  return NULL;
}

/* The compile recurses in C like a run: the same big stack (a SIGINT just ends the process:
   nothing is running that would need an orderly stop). */
static int check_on_thread(check_job *job) {
  pthread_attr_t attr;
  pthread_t thread;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    rc = pthread_attr_setstacksize(&attr, RUN_STACK_SIZE);
    if (rc == 0) rc = pthread_create(&thread, &attr, check_thread, job);
    pthread_attr_destroy(&attr);
  }
  if (rc != 0) {
    fprintf(stderr, "moonbox: cannot start the check thread: %s\n", strerror(rc));
    return -1;
  }
  pthread_join(thread, NULL);
  return 0;
}

/* Text shown on a terminal: control bytes become '?' (a name or message comes from the
   script, and escape sequences in it could rewrite what the user sees). */
static void print_sanitized(const char *s) {
  for (; *s; s++)
    fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, stdout);
}

/* The name of a finding for the text output: JSON-quoted and ASCII-only, so nothing the
   script chose reaches the terminal raw ({"$bytes": ...} for one that is not UTF-8). */
static void print_name(const json_t *name) {
  char *text = json_dumps(name, JSON_ENCODE_ANY | JSON_ENSURE_ASCII | JSON_COMPACT);
  fputs(text ? text : "?", stdout);
  free(text);
}

/* moonbox check [OPTIONS] (FILE | -e CODE | -): exit 0 clean, 1 with findings (or a syntax
   error), 2 on bad usage, 3 when compiling passed a limit. Names of --input/--input-file keys
   are globals the run will have: they are not findings. */
static int check_command(const mbxH_cli_options *opt) {
  mbx_policy *policy = NULL;
  byte_buffer script = {NULL, 0}, inputs_buf = {NULL, 0};
  char chunk_name[60];
  const char *chunk = "input", *inputs_text = NULL;
  size_t inputs_len = 0;
  json_t *inputs = NULL, *report = NULL;
  check_job job;
  int exit_code = EXIT_INTERNAL;

  memset(&job, 0, sizeof job);
  policy = mbxH_cli_make_policy(opt, &exit_code);
  if (policy == NULL) goto done;
  exit_code = load_script(opt, policy, &script, &job.code, &job.code_len, chunk_name,
                          sizeof chunk_name, &chunk);
  if (exit_code == 0) exit_code = load_inputs(opt, &inputs_buf, &inputs_text, &inputs_len);
  if (exit_code != 0) goto done;
  if (inputs_text != NULL) {
    json_error_t jerr;
    inputs = json_loadb(inputs_text, inputs_len, JSON_ALLOW_NUL, &jerr);
    if (inputs == NULL || !json_is_object(inputs)) {
      fprintf(stderr, "moonbox: %s: %s (give a JSON object whose keys are the input names)\n",
              opt->input_file ? "--input-file" : "--input",
              inputs == NULL ? jerr.text : "not a JSON object");
      exit_code = EXIT_USAGE;
      goto done;
    }
  }
  job.policy = policy;
  exit_code = EXIT_INTERNAL;
  if (check_on_thread(&job) != 0) goto done;
  if (job.status != MBX_OK) {
    fprintf(stderr, "moonbox: %s\n", job.err.message);
    exit_code = mbxH_cli_exit_code(job.status);
    goto done;
  }
  report = json_loadb(job.json, job.json_len, 0, NULL);
  json_t *globals = report ? json_object_get(report, "globals") : NULL;
  json_t *syntax = report ? json_object_get(report, "syntax_error") : NULL;
  if (!json_is_array(globals) || syntax == NULL) {
    fprintf(stderr, "moonbox: internal error: the check's report does not parse\n");
    goto done;
  }
  for (size_t i = json_array_size(globals); i-- > 0;) {
    const char *name = json_string_value(json_object_get(json_array_get(globals, i), "name"));
    if (name && inputs && json_object_get(inputs, name)) json_array_remove(globals, i);
  }
  int ok = json_is_null(syntax) && json_array_size(globals) == 0;
  json_object_set_new(report, "ok", json_boolean(ok));
  if (opt->json) {
    char *text = json_dumps(report, JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL) goto done;
    puts(text);
    free(text);
  } else if (!json_is_null(syntax)) {
    print_sanitized(chunk);
    printf(":%lld: syntax error: ", (long long)json_integer_value(json_object_get(syntax, "line")));
    print_sanitized(json_string_value(json_object_get(syntax, "message")));
    fputc('\n', stdout);
  } else {
    for (size_t i = 0; i < json_array_size(globals); i++) {
      json_t *g = json_array_get(globals, i);
      print_sanitized(chunk);
      printf(":%lld: %s of global ", (long long)json_integer_value(json_object_get(g, "line")),
             json_string_value(json_object_get(g, "access")));
      print_name(json_object_get(g, "name"));
      fputs(", which the policy does not provide\n", stdout);
    }
  }
  exit_code = ok ? 0 : 1;

done:
  json_decref(report);
  json_decref(inputs);
  mbx_free(job.json);
  mbx_policy_free(policy);
  free(script.data);
  free(inputs_buf.data);
  return exit_code;
}

/* Flushes stdout; a failed write (disk full, closed pipe) must not look like success. */
static int finish(int exit_code) {
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "moonbox: cannot write to stdout: %s\n", strerror(errno));
    return EXIT_INTERNAL;
  }
  return exit_code;
}

/* moonbox doctor: the exec backend's probe, as text or JSON; exit 0 when it is usable, 1 when
   not (the reason says why and what to do). */
static int doctor_command(const mbxH_cli_options *opt) {
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_runtime *rt = mbx_runtime_new(&err);
  char *json = NULL;
  size_t len = 0;
  if (rt == NULL ||
      (opt->exec_uid_count &&
       mbx_runtime_set_exec_uids(rt, opt->exec_uid_first, opt->exec_uid_count, &err) != MBX_OK) ||
      mbx_runtime_exec_status(rt, &json, &len, &err) != MBX_OK) {
    fprintf(stderr, "moonbox: doctor: %s\n", err.message);
    mbx_runtime_free(rt);
    return 1;
  }
  int ok = strstr(json, "\"available\":true") != NULL;
  /* The worker's jail (--isolate process): reported, never required for the exit code. */
  char *wjson = NULL;
  if (mbx_runtime_worker_status(rt, &wjson, NULL, &err) != MBX_OK) wjson = NULL;
  if (opt->json) {
    /* {exec's members..., "worker": {...}}: the exec object with one member more. */
    json_t *o = json_loads(json, 0, NULL), *w = wjson ? json_loads(wjson, 0, NULL) : NULL;
    if (o && w)
      json_object_set_new(o, "worker", w);
    else
      json_decref(w);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    printf("%s\n", text ? text : json);
    free(text);
    json_decref(o);
  } else {
    /* The JSON is flat enough to print as "key: value" lines. */
    printf("moonbox %s: exec backend %s\n", mbx_version(), ok ? "available" : "UNAVAILABLE");
    const char *keys[] = {
        "reason", "bwrap",   "bwrap_version", "helper",  "user_namespaces", "uid_isolation",
        "uids",   "seccomp", "limits",        "cgroups", "shared_memory",   "rw_mounts",
        NULL};
    for (int i = 0; keys[i]; i++) {
      char pat[40];
      snprintf(pat, sizeof pat, "\"%s\":", keys[i]);
      const char *v = strstr(json, pat);
      if (v == NULL) continue;
      v += strlen(pat);
      const char *end = v;
      int depth = 0, in_str = 0;
      for (; *end; end++) {
        if (in_str) {
          if (*end == '\\' && end[1])
            end++;
          else if (*end == '"')
            in_str = 0;
          continue;
        }
        if (*end == '"')
          in_str = 1;
        else if (*end == '[' || *end == '{')
          depth++;
        else if (*end == ']' || *end == '}') {
          if (depth == 0) break;
          depth--;
        } else if (*end == ',' && depth == 0)
          break;
      }
      printf("  %-16s %.*s\n", keys[i], (int)(end - v), v);
    }
    json_t *w = wjson ? json_loads(wjson, 0, NULL) : NULL;
    int wok = json_is_true(json_object_get(w, "available"));
    printf("worker (--isolate process) %s\n", w == NULL ? "UNKNOWN (out of memory)"
                                              : wok     ? "available"
                                                        : "UNAVAILABLE");
    const char *wkeys[] = {"reason",
                           "worker",
                           "uid",
                           "user_namespace",
                           "capabilities",
                           "worker_start_us",
                           "no_new_privs",
                           "seccomp",
                           "pid_namespace",
                           "net_namespace",
                           NULL};
    for (int i = 0; w && wkeys[i]; i++) {
      json_t *v = json_object_get(w, wkeys[i]);
      if (v == NULL || json_is_null(v)) continue;
      char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      printf("  %-16s %s\n", wkeys[i], t ? t : "?");
      free(t);
    }
    json_decref(w);
  }
  mbx_free(wjson);
  mbx_free(json);
  mbx_runtime_free(rt);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  mbxH_cli_options opt;
  char msg[MBXH_CLI_MSG_SIZE];
  /* moonbox fuzz passes most of its arguments on to libFuzzer: it has its own parser. */
  if (argc >= 2 && strcmp(argv[1], "fuzz") == 0) return mbxH_cli_fuzz(argc, argv);
  if (mbxH_cli_parse(argc, argv, &opt, msg, sizeof msg) != 0) {
    fprintf(stderr, "moonbox: %s\n", msg);
    return EXIT_USAGE;
  }
  switch (opt.command) {
  case MBXH_CLI_HELP:
    fputs(mbxH_cli_usage(opt.help_for), stdout);
    return finish(0);
  case MBXH_CLI_VERSION:
    printf("moonbox %s (Lua 5.4)\n", mbx_version());
    return finish(0);
  case MBXH_CLI_RESUME:
    return finish(resume_command(&opt));
  case MBXH_CLI_CHECK:
    return finish(check_command(&opt));
  case MBXH_CLI_DOCTOR:
    return finish(doctor_command(&opt));
  case MBXH_CLI_MCP: {
    /* The server's policy caps every call (docs/mcp.md); stdout is the protocol's. */
    int exit_code = EXIT_USAGE;
    mbxH_code_mode *code = NULL;
    if (mbxH_code_configure(opt.policy_file, (const char *const *)opt.upstream_args,
                            opt.upstream_arg_is_allow, opt.upstream_arg_count, opt.code_mode, &code,
                            msg, sizeof msg) != 0) {
      fprintf(stderr, "moonbox mcp: %s\n", msg);
      return EXIT_USAGE;
    }
    mbx_policy *policy = mbxH_cli_make_policy(&opt, &exit_code);
    if (policy == NULL) {
      mbxH_code_free(code);
      return exit_code;
    }
    int http_extra = opt.http_behind_proxy;
    for (int i = MBXH_CLI_HTTP_LISTEN + 1; i < MBXH_CLI_HTTP_VALUES; i++)
      http_extra |= opt.http[i] != NULL;
    if (opt.http[MBXH_CLI_HTTP_LISTEN] == NULL && http_extra) {
      fprintf(stderr, "moonbox mcp: the --http-* options go with --http HOST:PORT\n");
      mbxH_code_free(code);
      mbx_policy_free(policy);
      return EXIT_USAGE;
    }
    _Static_assert(MBXH_CLI_SESSION_PREFIX_MAX <= MBXH_HTTP_SESSION_PREFIX_MAX,
                   "every prefix the parse accepts fits the listener's session ids");
    mbxH_mcp_http_config http = {.listen = opt.http[MBXH_CLI_HTTP_LISTEN],
                                 .token_file = opt.http[MBXH_CLI_HTTP_TOKEN_FILE],
                                 .cert_file = opt.http[MBXH_CLI_HTTP_CERT],
                                 .key_file = opt.http[MBXH_CLI_HTTP_KEY],
                                 .allow_origin = opt.http[MBXH_CLI_HTTP_ALLOW_ORIGIN],
                                 .behind_proxy = opt.http_behind_proxy,
                                 .session_prefix = opt.http[MBXH_CLI_HTTP_SESSION_PREFIX]};
    exit_code = mbxH_mcp_serve(policy, opt.isolate, opt.exec_uid_first, opt.exec_uid_count, code,
                               http.listen ? &http : NULL, opt.hibernate_after_ms);
    mbxH_code_free(code); /* ends the upstreams */
    mbx_policy_free(policy);
    return exit_code;
  }
  case MBXH_CLI_REPL:
    return finish(mbxH_cli_repl(&opt));
  case MBXH_CLI_RUN:
    break;
  }
  return finish(run_command(&opt));
}
