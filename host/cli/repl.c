/* host/cli/repl.c -- `moonbox repl`: lines read (edited with libedit on a terminal), gathered
   into entries (repl_entry.c), each run in one sandbox behind a checkpoint, its output printed. */
#include "host/cli/repl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#ifdef MBX_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "host/cli/repl_entry.h"
#include "host/options/policy.h"
#include "moonbox.h"

/* mbx_run and mbx_check need >= 1 MiB of free C stack: each entry gets a thread with this
   much, as `moonbox run` does (host/cli/main.c). */
#define ENTRY_STACK_SIZE ((size_t)8 * 1024 * 1024)
/* --input-file: only stops `--input-file /dev/zero` eating RAM (as for run). */
#define INPUT_FILE_MAX ((size_t)64 * 1024 * 1024)

/* The sandbox a SIGINT interrupts (NULL at the prompt), and SIGINTs seen at the prompt or
   during the current entry. Atomic: the signal handler reads and writes them. */
static _Atomic(mbx_sandbox *) running_sandbox;
static atomic_int sigints;
/* The self-pipe of SIGINT: the handler writes a byte, the prompt's read polls it. */
static int sigint_pipe[2] = {-1, -1};

/* One typed line, decided and run on the entry thread. */
typedef struct entry_job {
  mbxH_repl_entry *entry;
  const mbx_policy *policy;
  mbx_sandbox *sandbox;
  const char *line;
  size_t len;
  mbxH_repl_verdict verdict;
  char msg[512];
  mbx_result *result; /* NULL when no run happened */
  mbx_status status;
  mbx_error err;
  int undone; /* the entry ended on a limit, an interrupt or a pause: rewound (1) or reset (2) */
} entry_job;

/* Only async-signal-safe work. During an entry: counted (run_entry interrupts it); a second
   Ctrl-C during the same entry (one the interrupt could not stop) ends the process the
   ordinary way. At the prompt: counted and written to the self-pipe, which ends the read
   (repl_getc, or EINTR for a plain read): the line being typed is dropped. */
static void on_sigint(int signo) {
  int saved_errno = errno;
  mbx_sandbox *sb = atomic_load(&running_sandbox);
  int seen = atomic_fetch_add(&sigints, 1);
  if (sigint_pipe[1] >= 0) {
    /* Wakes the prompt's read even when the signal came just before it blocked. */
    ssize_t ignored = write(sigint_pipe[1], "", 1);
    (void)ignored;
  }
  /* No mbx_sandbox_interrupt here: in worker mode it takes a mutex, which the main thread may
     hold in its own interrupt call when the signal lands on it (a self-deadlock). The entry's
     waiting loop (run_entry) sends the interrupt within 50 ms of the count going up. */
  if (sb != NULL) {
    if (seen > 0) {
      struct sigaction dfl;
      memset(&dfl, 0, sizeof dfl);
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(signo, &dfl, NULL);
      raise(signo);
    }
  }
  errno = saved_errno;
}

static void *entry_thread(void *arg) {
  entry_job *job = arg;
  char *code = NULL;
  size_t code_len = 0;
  job->verdict = mbxH_repl_add_line(job->entry, job->policy, job->line, job->len, &code, &code_len,
                                    job->msg, sizeof job->msg);
  if (job->verdict != MBXH_REPL_RUN) return NULL;
  /* The checkpoint before the entry: one that ends on a limit is undone, and the session
     goes on from the state before it (as an MCP session does: host/mcp/tools.c). Without
     checkpoints (the asan build's malloc arena) the session starts afresh instead. */
  mbx_status cp = mbx_sandbox_checkpoint(job->sandbox, &job->err);
  if (cp != MBX_OK && cp != MBX_UNSUPPORTED) {
    job->status = cp;
    free(code);
    return NULL;
  }
  job->status = mbx_run_named(job->sandbox, code, code_len, MBXH_REPL_CHUNK, NULL, 0, &job->result,
                              &job->err);
  free(code);
  if (job->result != NULL &&
      (mbx_sandbox_poisoned(job->sandbox) || mbx_sandbox_paused(job->sandbox))) {
    mbx_error e2;
    if (cp == MBX_OK && mbx_sandbox_rewind(job->sandbox, &e2) == MBX_OK)
      job->undone = 1;
    else if (mbx_sandbox_reset(job->sandbox, &e2) == MBX_OK)
      job->undone = 2;
  }
  return NULL;
}

/* Runs the job on its own thread with the big stack; SIGINT reaches the handler on this
   (the main) thread while it waits, so the sandbox is never freed under the handler. */
static int run_entry(entry_job *job) {
  pthread_attr_t attr;
  pthread_t thread;
  sigset_t block, old_mask;
  int rc;
  atomic_store(&sigints, 0);
  atomic_store(&running_sandbox, job->sandbox);
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  rc = pthread_attr_init(&attr);
  if (rc == 0) {
    rc = pthread_attr_setstacksize(&attr, ENTRY_STACK_SIZE);
    if (rc == 0) rc = pthread_create(&thread, &attr, entry_thread, job);
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  /* An interrupt that comes while no run is active is discarded (mbx_sandbox_interrupt), and
     a Ctrl-C can come while the entry is still being compiled, before its run starts: once
     one came, it is sent again every 50 ms until the entry's thread ends. */
  while (rc == 0) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 50 * 1000 * 1000;
    if (until.tv_nsec >= 1000 * 1000 * 1000) {
      until.tv_sec++;
      until.tv_nsec -= 1000 * 1000 * 1000;
    }
    if (pthread_timedjoin_np(thread, NULL, &until) == 0) break;
    if (atomic_load(&sigints) > 0) (void)mbx_sandbox_interrupt(job->sandbox);
  }
  atomic_store(&running_sandbox, NULL);
  atomic_store(&sigints, 0);
  if (rc != 0) fprintf(stderr, "moonbox: cannot start the entry thread: %s\n", strerror(rc));
  return rc == 0 ? 0 : -1;
}

/* The error of a failed entry, as lua -i shows it: the message with its position, then the
   traceback; a limit also says that the entry was undone. */
static void print_error(const entry_job *job) {
  const mbx_result *res = job->result;
  mbx_status status = mbx_result_status(res);
  mbx_error e;
  size_t tb_len = 0;
  memset(&e, 0, sizeof e);
  (void)mbx_result_error(res, &e);
  if (e.message[0] == '\0')
    (void)snprintf(e.message, sizeof e.message, "%s", mbx_status_str(status));
  char prefix[96];
  prefix[0] = '\0';
  if (e.line > 0 && e.chunk[0] != '\0') {
    (void)snprintf(prefix, sizeof prefix, "%s:%d: ", e.chunk, e.line);
    if (strncmp(e.message, prefix, strlen(prefix)) == 0) prefix[0] = '\0';
  }
  if (status == MBX_SYNTAX_ERROR || status == MBX_RUNTIME_ERROR) {
    fprintf(stderr, "%s%s\n", prefix, e.message);
    const char *tb = mbx_result_traceback(res, &tb_len);
    if (tb != NULL && tb_len > 0) {
      size_t shown_len = tb_len;
      char *shown = mbxH_repl_traceback(tb, tb_len, &shown_len);
      fwrite(shown ? shown : tb, 1, shown ? shown_len : tb_len, stderr);
      fputc('\n', stderr);
      free(shown);
    }
    return;
  }
  if (status == MBX_PAUSED) {
    fputs("moonbox: the entry called an external function, which nobody at this prompt can "
          "answer",
          stderr);
  } else {
    fprintf(stderr, "moonbox: %s%s", prefix, e.message);
  }
  if (job->undone == 1)
    fputs(" (the entry was undone: the session is as it was before it)\n", stderr);
  else if (job->undone == 2)
    fputs(" (the session could not be rewound: it starts afresh)\n", stderr);
  else
    fputc('\n', stderr);
}

/* Prints what the entry did. Returns -1 to go on, or the exit code the session ends with. */
static int print_entry(const entry_job *job) {
  if (job->verdict == MBXH_REPL_SYNTAX) {
    fprintf(stderr, "%s\n", job->msg);
    return -1;
  }
  if (job->verdict == MBXH_REPL_FAILED) {
    fprintf(stderr, "moonbox: %s\n", job->msg);
    return -1;
  }
  if (job->verdict == MBXH_REPL_MORE) return -1;
  if (job->result == NULL) {
    /* No run happened: the sandbox refused it or the checkpoint failed. */
    fprintf(stderr, "moonbox: %s\n",
            job->err.message[0] ? job->err.message : mbx_status_str(job->status));
    return job->status == MBX_SANDBOX_POISONED ? MBXH_CLI_EXIT_INTERNAL : -1;
  }
  size_t len = 0;
  const char *text = mbx_result_stdout(job->result, &len);
  if (len > 0) fwrite(text, 1, len, stdout);
  fflush(stdout);
  text = mbx_result_stderr(job->result, &len);
  if (len > 0) fwrite(text, 1, len, stderr);
  int64_t code;
  if (mbx_result_exit_code(job->result, &code)) return mbxH_cli_exit_code_for_exit(code);
  if (mbx_result_status(job->result) != MBX_OK) print_error(job);
  return -1;
}

#ifdef MBX_HAVE_LIBEDIT
/* One byte of the terminal, or -1 once a Ctrl-C came (or at end of input). A read() that a
   signal interrupts is retried by libedit when the signal came before it blocked: polling the
   self-pipe with the terminal closes that window. */
static int terminal_byte(int fd) {
  for (;;) {
    if (atomic_load(&sigints) > 0) return -1;
    struct pollfd fds[2] = {{fd, POLLIN, 0}, {sigint_pipe[0], POLLIN, 0}};
    int n = poll(fds, sigint_pipe[0] >= 0 ? 2 : 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (fds[1].revents & POLLIN) {
      char drain[64];
      while (read(sigint_pipe[0], drain, sizeof drain) > 0) {
      }
      continue;
    }
    unsigned char c;
    ssize_t got = read(fd, &c, 1);
    if (got == 1) return c;
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return -1;
  }
}

/* libedit's character reader (rl_getc_function): one character, decoded in the terminal's
   character set (libedit takes the value as a wide character), or -1, which ends readline. */
static int repl_getc(FILE *in) {
  mbstate_t state;
  char bytes[MB_LEN_MAX];
  size_t n = 0;
  memset(&state, 0, sizeof state);
  for (;;) {
    int c = terminal_byte(fileno(in));
    if (c < 0) return -1;
    /* A Ctrl-D typed while an entry ran reached the terminal in its line mode, which keeps an
       end of file as a NUL byte; libedit's switch to character mode hands over that NUL. It
       is read as the Ctrl-D it was (leaving on an empty line), not put into the line. */
    if (c == 0 && n == 0) return 4;
    bytes[n++] = (char)c;
    wchar_t wc;
    mbstate_t probe = state;
    size_t r = mbrtowc(&wc, bytes, n, &probe);
    if (r == (size_t)-2 && n < sizeof bytes) continue; /* more bytes of this character */
    if (r == (size_t)-1 || r == (size_t)-2) return (unsigned char)bytes[0]; /* not a character */
    return r == 0 ? 0 : (int)wc;
  }
}
#endif

/* What read_line found. */
enum { LINE_OK, LINE_END, LINE_DROPPED, LINE_TOO_LONG };

/* A line read from a pipe or file, at most max bytes kept: the rest of a longer line is read
   and dropped, so piped input cannot grow this process past the source limit (a line longer
   than it could never run). Returns LINE_OK, LINE_END, LINE_DROPPED (Ctrl-C) or LINE_TOO_LONG. */
static int read_plain_line(size_t max, char **line, size_t *len) {
  size_t cap = 0, n = 0;
  int c, too_long = 0;
  char *buf = NULL;
  errno = 0;
  while ((c = getc(stdin)) != EOF && c != '\n') {
    if (n >= max) {
      too_long = 1;
      continue;
    }
    if (n + 1 >= cap) {
      size_t next = cap ? cap * 2 : 256;
      char *grown = realloc(buf, next);
      if (grown == NULL) {
        free(buf);
        return LINE_END;
      }
      buf = grown;
      cap = next;
    }
    buf[n++] = (char)c;
  }
  if (c == EOF && ferror(stdin) && errno == EINTR && atomic_load(&sigints) > 0) {
    clearerr(stdin);
    free(buf);
    return LINE_DROPPED;
  }
  if (c == EOF && n == 0 && !too_long) {
    free(buf);
    return LINE_END;
  }
  if (too_long) {
    free(buf);
    return LINE_TOO_LONG;
  }
  if (n > 0 && buf[n - 1] == '\r') n--;
  if (buf == NULL && (buf = malloc(1)) == NULL) return LINE_END;
  buf[n] = '\0';
  *line = buf;
  *len = n;
  return LINE_OK;
}

/* One line from standard input, without its newline, into *line (malloc'd; *len bytes), at
   most max bytes of it (see read_plain_line). */
static int read_line(int interactive, const char *prompt, size_t max, char **line, size_t *len) {
  *line = NULL;
  *len = 0;
  atomic_store(&sigints, 0);
#ifdef MBX_HAVE_LIBEDIT
  if (interactive) {
    char *got = readline(prompt);
    if (atomic_load(&sigints) > 0) {
      /* Ctrl-C while typing: the line (and the entry so far) is dropped, as in a shell. */
      free(got);
      fputc('\n', stdout);
      return LINE_DROPPED;
    }
    if (got == NULL) return LINE_END;
    if (got[0] != '\0') add_history(got);
    *line = got;
    *len = strlen(got);
    return LINE_OK;
  }
#endif
  if (interactive) {
    fputs(prompt, stdout);
    fflush(stdout);
  }
  int got = read_plain_line(max, line, len);
  if (got == LINE_DROPPED && interactive) fputc('\n', stdout);
  return got;
}

/* Reads --input or --input-file into *text (*owned: what to free). 0, or the exit code. */
static int load_inputs(const mbxH_cli_options *opt, char **owned, const char **text, size_t *len) {
  *owned = NULL;
  *text = opt->input_json;
  *len = opt->input_json ? strlen(opt->input_json) : 0;
  if (opt->input_file == NULL) return 0;
  FILE *f = fopen(opt->input_file, "rb");
  if (f == NULL) {
    fprintf(stderr, "moonbox: --input-file: cannot open '%s': %s\n", opt->input_file,
            strerror(errno));
    return MBXH_CLI_EXIT_USAGE;
  }
  char *buf = malloc(INPUT_FILE_MAX + 1);
  size_t n = buf ? fread(buf, 1, INPUT_FILE_MAX + 1, f) : 0;
  int failed = buf == NULL || ferror(f);
  fclose(f);
  if (failed || n == 0 || n > INPUT_FILE_MAX) {
    fprintf(stderr, "moonbox: --input-file: '%s' is %s (give a JSON object)\n", opt->input_file,
            failed   ? "unreadable"
            : n == 0 ? "empty"
                     : "larger than 64 MiB");
    free(buf);
    return MBXH_CLI_EXIT_USAGE;
  }
  *owned = buf;
  *text = buf;
  *len = n;
  return 0;
}

/* The sandbox of the session, its globals from --input/--input-file bound by an empty first
   run. NULL with *exit_code after printing why. */
static mbx_sandbox *open_session(const mbxH_cli_options *opt, mbx_runtime *rt,
                                 const mbx_policy *policy, int *exit_code) {
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_sandbox *sb = mbx_sandbox_new(rt, policy, &err);
  if (sb == NULL) {
    fprintf(stderr, "moonbox: %s\n", err.message);
    *exit_code = MBXH_CLI_EXIT_INTERNAL;
    return NULL;
  }
  char *owned = NULL;
  const char *inputs;
  size_t inputs_len;
  *exit_code = load_inputs(opt, &owned, &inputs, &inputs_len);
  if (*exit_code != 0 || inputs == NULL) {
    free(owned);
    if (*exit_code == 0) return sb;
    mbx_sandbox_free(sb);
    return NULL;
  }
  mbx_result *res = NULL;
  mbx_status st = mbx_run_named(sb, "", 0, MBXH_REPL_CHUNK, inputs, inputs_len, &res, &err);
  free(owned);
  mbx_result_free(res);
  if (st != MBX_OK) {
    fprintf(stderr, "moonbox: %s: %s\n", opt->input_file ? "--input-file" : "--input",
            err.message[0] ? err.message : mbx_status_str(st));
    *exit_code = st == MBX_INVALID_INPUT ? MBXH_CLI_EXIT_USAGE : mbxH_cli_exit_code(st);
    mbx_sandbox_free(sb);
    return NULL;
  }
  return sb;
}

/* SIGINT goes to on_sigint for the whole session (without SA_RESTART, so that a read at the
   prompt returns), unless it was ignored (a background job's stays ignored). */
static void catch_sigint(struct sigaction *old_action) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, NULL, old_action);
  if (old_action->sa_handler != SIG_IGN) sigaction(SIGINT, &action, NULL);
}

int mbxH_cli_repl(const mbxH_cli_options *opt) {
  int exit_code = MBXH_CLI_EXIT_INTERNAL;
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_policy *policy = mbxH_cli_make_policy(opt, &exit_code);
  if (policy == NULL) return exit_code;
  mbx_runtime *rt = mbx_runtime_new(&err);
  if (rt != NULL &&
      ((opt->isolate &&
        mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err) != MBX_OK) ||
       (opt->exec_uid_count &&
        mbx_runtime_set_exec_uids(rt, opt->exec_uid_first, opt->exec_uid_count, &err) != MBX_OK))) {
    mbx_runtime_free(rt);
    rt = NULL;
  }
  if (rt == NULL) {
    fprintf(stderr, "moonbox: %s\n", err.message);
    mbx_policy_free(policy);
    return MBXH_CLI_EXIT_INTERNAL;
  }
  /* Each entry runs inside the wrapper (repl_entry.h), whose bytes are the REPL's, not the
     user's: the sandbox gets a source limit with room for them, and entries are checked
     against the limit the user set (less the wrapper where that is already the library's
     maximum), so an entry the check takes is never refused by its run. The sandbox keeps a
     copy of the policy's settings: the limit is set back for the checks once it is made. */
  uint64_t user_source = mbx_policy_get_limit(policy, MBX_LIMIT_SOURCE);
  uint64_t wrap_extra = mbxH_repl_wrap_extra();
  int raised = mbx_policy_set_limit(policy, MBX_LIMIT_SOURCE, user_source + wrap_extra) == MBX_OK;
  mbx_sandbox *sb = open_session(opt, rt, policy, &exit_code);
  if (raised)
    (void)mbx_policy_set_limit(policy, MBX_LIMIT_SOURCE, user_source);
  else if (user_source > wrap_extra)
    (void)mbx_policy_set_limit(policy, MBX_LIMIT_SOURCE, user_source - wrap_extra);
  if (sb == NULL) {
    mbx_runtime_free(rt);
    mbx_policy_free(policy);
    return exit_code;
  }
  int interactive = isatty(STDIN_FILENO);
#ifdef MBX_HAVE_LIBEDIT
  /* Our handler, not libedit's, sees Ctrl-C (libedit's re-raises it to the process group),
     and our reader ends readline when it comes. */
  rl_catch_signals = 0;
  rl_getc_function = repl_getc;
  /* libedit decodes what is typed in the terminal's character set (UTF-8 and the like); runs
     and checks switch their thread to the C locale (uselocale), so the guest never sees it. */
  if (interactive) setlocale(LC_CTYPE, "");
#endif
  if (interactive)
    printf("moonbox %s (Lua 5.4) -- one sandbox; Ctrl-D leaves, Ctrl-C stops an entry\n",
           mbx_version());
  struct sigaction old_action;
  if (interactive && pipe2(sigint_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    sigint_pipe[0] = sigint_pipe[1] = -1;
  catch_sigint(&old_action);
  mbxH_repl_entry entry = {NULL, 0, 0, 0};
  uint64_t source_limit = mbx_policy_get_limit(policy, MBX_LIMIT_SOURCE);
  size_t line_max = source_limit < SIZE_MAX ? (size_t)source_limit : SIZE_MAX;
  exit_code = 0;
  for (;;) {
    char *line;
    size_t len;
    int got = read_line(interactive, entry.lines > 0 ? ">> " : "> ", line_max, &line, &len);
    if (got == LINE_END) {
      if (entry.lines > 0) {
        /* End of input inside an entry: lua -i reports the unfinished chunk. */
        fprintf(stderr, "moonbox: end of input inside an unfinished entry (it was not run)\n");
      }
      if (interactive) fputc('\n', stdout);
      break;
    }
    if (got == LINE_TOO_LONG)
      fprintf(stderr,
              "moonbox: a line longer than the source limit of %zu bytes was dropped, with "
              "the entry it was part of (raise the limit with --source-limit, up to 16M)\n",
              line_max);
    if (got != LINE_OK) {
      mbxH_repl_entry_clear(&entry);
      continue;
    }
    entry_job job;
    memset(&job, 0, sizeof job);
    job.entry = &entry;
    job.policy = policy;
    job.sandbox = sb;
    job.line = line;
    job.len = len;
    int rc = run_entry(&job);
    free(line);
    if (rc != 0) {
      exit_code = MBXH_CLI_EXIT_INTERNAL;
      break;
    }
    int done = print_entry(&job);
    mbx_result_free(job.result);
    if (done >= 0) {
      exit_code = done;
      break;
    }
  }
  sigaction(SIGINT, &old_action, NULL);
  for (int i = 0; i < 2; i++)
    if (sigint_pipe[i] >= 0) close(sigint_pipe[i]);
  sigint_pipe[0] = sigint_pipe[1] = -1;
  mbxH_repl_entry_free(&entry);
  mbx_sandbox_free(sb);
  mbx_runtime_free(rt);
  mbx_policy_free(policy);
  return exit_code;
}
