/* moonbox._moonbox: the binding's hot path in C (runs, results, values, host calls, Ctrl-C).
**
** Built against the limited API (one build serves CPython 3.9+). It does not link libmoonbox:
** _native.py finds and loads the library exactly as before (MOONBOX_LIBRARY, the path recorded
** at install, the build tree) and hands its dlopen handle to init(), which resolves the
** functions used here from it, so ctypes (the cold paths: policies, checkpoints, snapshots) and
** this module always share one copy of the library.
**
** Ctrl-C without a second thread per call: while a run of a sandbox made with ctrl_c=True is in
** C on the main thread, SIGINT's handler is ours. It only counts the signal and posts a
** semaphore (both async-signal-safe; mbx_sandbox_interrupt is not in worker mode, where it
** takes a mutex), and one process-wide thread, started at the first such run, interrupts the
** running sandbox. While a host function (Python code) runs, the handler also chains to the
** handler it replaced (Python's), so that Python code sees KeyboardInterrupt. The run then ends
** "interrupted" and the sandbox is left as any interrupted run leaves it (poisoned until reset).
*/
#include "_values.h"

#include <structmember.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moonbox.h"

/* What the 3.9 limited API leaves out. */
static inline PyObject *new_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}
#define SET_REF(slot, value)                                                                       \
  do {                                                                                             \
    PyObject *old_ = (PyObject *)(slot);                                                           \
    (slot) = (value);                                                                              \
    Py_XDECREF(old_);                                                                              \
  } while (0)

/* ---- the library's functions, resolved from the handle ctypes opened ---- */

#define MBX_FUNCTIONS(X)                                                                           \
  X(mbx_status_key)                                                                                \
  X(mbx_free)                                                                                      \
  X(mbx_run_named)                                                                                 \
  X(mbx_resume)                                                                                    \
  X(mbx_resume_error)                                                                              \
  X(mbx_sandbox_interrupt)                                                                         \
  X(mbx_sandbox_changes)                                                                           \
  X(mbx_result_status)                                                                             \
  X(mbx_result_json)                                                                               \
  X(mbx_result_value_json)                                                                         \
  X(mbx_result_stdout)                                                                             \
  X(mbx_result_stderr)                                                                             \
  X(mbx_result_free)                                                                               \
  X(mbx_host_reply_json)                                                                           \
  X(mbx_host_reply_error)                                                                          \
  X(mbx_policy_add_function)                                                                       \
  X(mbx_sandbox_free)                                                                              \
  X(mbx_sandbox_new)

#define DECLARE(name) static __typeof__(&name) p_##name;
MBX_FUNCTIONS(DECLARE)
#undef DECLARE

static PyObject *moonbox_error;                    /* sandbox.MoonboxError */
static PyObject *status_keys[MBX_UNSUPPORTED + 1]; /* "ok", "runtime_error", ... interned */
static PyObject *empty_bytes;
static PyTypeObject *result_base_type;

/* ---- results ----------------------------------------------------------------------------- */

/* The base of sandbox.Result: status, value and output are set when it is made; json, error,
   usage and pending come from the result's JSON text, parsed at the first read of one of them
   (the C result is kept until then). */
typedef struct {
  PyObject_HEAD PyObject *status, *value, *stdout_bytes, *stderr_bytes, *changes, *json;
  mbx_result *res;
} result_obj;

static void result_dealloc(PyObject *self) {
  result_obj *r = (result_obj *)self;
  PyTypeObject *type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(r->status);
  Py_CLEAR(r->value);
  Py_CLEAR(r->stdout_bytes);
  Py_CLEAR(r->stderr_bytes);
  Py_CLEAR(r->changes);
  Py_CLEAR(r->json);
  p_mbx_result_free(r->res);
  r->res = NULL;
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type);
}

static int result_traverse(PyObject *self, visitproc visit, void *arg) {
  result_obj *r = (result_obj *)self;
  Py_VISIT(r->value);
  Py_VISIT(r->changes);
  Py_VISIT(r->json);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

/* The C result stays until the Result goes (not freed once parsed: the parse allocates, so the
   garbage collector may run a finalizer that reads r.json meanwhile, parsing the same text). */
static PyObject *result_json_dict(result_obj *r) {
  if (r->json == NULL) {
    size_t n = 0;
    const char *text = p_mbx_result_json(r->res, &n);
    PyObject *d = mbxpy_parse_json(text, n);
    if (d == NULL) return NULL;
    if (r->json == NULL)
      r->json = d;
    else
      Py_DECREF(d);
  }
  return r->json;
}

static PyObject *result_get(PyObject *self, void *key) {
  PyObject *d = result_json_dict((result_obj *)self);
  if (d == NULL) return NULL;
  if (key == NULL) return new_ref(d);
  PyObject *v = PyDict_GetItemString(d, (const char *)key);
  return new_ref(v ? v : Py_None);
}

static PyMemberDef result_members[] = {
    {"status", T_OBJECT, offsetof(result_obj, status), 0, NULL},
    {"value", T_OBJECT, offsetof(result_obj, value), 0, NULL},
    {"stdout_bytes", T_OBJECT, offsetof(result_obj, stdout_bytes), 0, NULL},
    {"stderr_bytes", T_OBJECT, offsetof(result_obj, stderr_bytes), 0, NULL},
    {"changes", T_OBJECT, offsetof(result_obj, changes), 0, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef result_getset[] = {
    {"json", result_get, NULL, "the whole result contract as a dict", NULL},
    {"error", result_get, NULL, NULL, "error"},
    {"usage", result_get, NULL, NULL, "usage"},
    {"pending", result_get, NULL, NULL, "pending"},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot result_slots[] = {{Py_tp_dealloc, result_dealloc},
                                     {Py_tp_traverse, result_traverse},
                                     {Py_tp_members, result_members},
                                     {Py_tp_getset, result_getset},
                                     {0, NULL}};

static PyType_Spec result_spec = {"moonbox._moonbox.ResultBase", sizeof(result_obj), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                                  result_slots};

static PyObject *bytes_of(const char *p, size_t n) {
  return n == 0 ? new_ref(empty_bytes) : PyBytes_FromStringAndSize(p, (Py_ssize_t)n);
}

static PyObject *status_key(int code) {
  if (code >= 0 && code <= MBX_UNSUPPORTED && status_keys[code] != NULL)
    return new_ref(status_keys[code]);
  const char *key = p_mbx_status_key((mbx_status)code);
  return key ? PyUnicode_FromString(key) : PyUnicode_FromFormat("status_%d", code);
}

/* Takes res: the Result of cls, or NULL with res freed. */
static PyObject *make_result(PyTypeObject *cls, mbx_result *res) {
  allocfunc alloc = (allocfunc)PyType_GetSlot(cls, Py_tp_alloc);
  result_obj *r = (result_obj *)alloc(cls, 0);
  if (r == NULL) {
    p_mbx_result_free(res);
    return NULL;
  }
  r->res = res;
  size_t n = 0;
  const char *text = p_mbx_result_value_json(res, &n);
  r->value = mbxpy_parse_json(text, n);
  r->status = status_key(p_mbx_result_status(res));
  text = p_mbx_result_stdout(res, &n);
  r->stdout_bytes = bytes_of(text, n);
  text = p_mbx_result_stderr(res, &n);
  r->stderr_bytes = bytes_of(text, n);
  r->changes = new_ref(Py_None);
  if (!r->value || !r->status || !r->stdout_bytes || !r->stderr_bytes) {
    Py_DECREF(r);
    return NULL;
  }
  return (PyObject *)r;
}

/* ---- Ctrl-C ------------------------------------------------------------------------------ */

static pthread_mutex_t sig_mu = PTHREAD_MUTEX_INITIALIZER; /* guards sig_running */
static mbx_sandbox *sig_running;   /* the main thread's running sandbox (under sig_mu) */
static uint64_t sig_generation;    /* bumped when sig_running changes (under sig_mu) */
static atomic_uint sig_count;      /* SIGINTs seen by our handler */
static atomic_int sig_in_callback; /* a host function (Python code) runs */
/* The handler ours replaced (Python's), in two slots: a new one is written into the slot the
   handler is not reading, then published, since our handler may still be running on another
   thread when ours has just been replaced (and a new one is saved 100 ms later at the soonest). */
static struct sigaction sig_saved_slots[2];
static atomic_int sig_saved_slot;
static int sig_depth;          /* nested guarded calls (main thread, under the GIL) */
static atomic_int sig_active;  /* sig_depth > 0, for the handler */
static int sig_installed;      /* ours is SIGINT's handler (as last checked) */
static int64_t sig_checked_ms; /* when that was checked (CLOCK_MONOTONIC_COARSE) */
static sem_t sig_sem;
static int sig_thread_started;
static unsigned long main_thread_ident;

static void chain_saved(int signo, siginfo_t *info, void *ctx) {
  const struct sigaction *saved = &sig_saved_slots[atomic_load(&sig_saved_slot)];
  if (saved->sa_flags & SA_SIGINFO) {
    if (saved->sa_sigaction != NULL) saved->sa_sigaction(signo, info, ctx);
  } else if (saved->sa_handler != SIG_DFL && saved->sa_handler != SIG_IGN &&
             saved->sa_handler != NULL) {
    saved->sa_handler(signo);
  }
}

/* Async-signal-safe only: an atomic counter, sem_post, and the replaced handler (Python's,
   itself a signal handler) while Python code of a host function runs. */
static void on_sigint(int signo, siginfo_t *info, void *ctx) {
  int saved_errno = errno;
  if (!atomic_load(&sig_active)) {
    chain_saved(signo, info, ctx); /* no guarded run: Python's, as if ours were not there */
  } else {
    atomic_fetch_add(&sig_count, 1);
    sem_post(&sig_sem);
    if (atomic_load(&sig_in_callback)) chain_saved(signo, info, ctx);
  }
  errno = saved_errno;
}

/* Whether SIGINT's handler is ours, installing it in place of Python's when it is not. Ours
   stays installed between runs (it chains to Python's then), so a run costs no system call:
   the handler in place is checked again at most every 100 ms, since Python's signal.signal()
   replaces it (then ours goes back over the Python handler, unless the host chose SIG_DFL or
   SIG_IGN, which is left alone). */
static int sig_handler_ours(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
  if (sig_installed && now_ms - sig_checked_ms < 100) return 1;
  sig_checked_ms = now_ms;
  struct sigaction cur;
  if (sigaction(SIGINT, NULL, &cur) != 0) return sig_installed = 0;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigint) return sig_installed = 1;
  if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN))
    return sig_installed = 0;
  int next = 1 - atomic_load(&sig_saved_slot);
  sig_saved_slots[next] = cur;
  atomic_store(&sig_saved_slot, next);
  struct sigaction ours;
  memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = on_sigint;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | (cur.sa_flags & SA_RESTART);
  sigemptyset(&ours.sa_mask);
  return sig_installed = sigaction(SIGINT, &ours, NULL) == 0;
}

/* The one interrupter thread: interrupts the running sandbox, and again every 10 ms while the
   same run goes on (a SIGINT that came before the run had started would otherwise be lost:
   a run starts with its interrupt flag clear). */
static void *interrupter(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  for (;;) {
    while (sem_wait(&sig_sem) != 0) {
    }
    pthread_mutex_lock(&sig_mu);
    mbx_sandbox *sb = sig_running;
    uint64_t gen = sig_generation;
    if (sb != NULL) p_mbx_sandbox_interrupt(sb);
    pthread_mutex_unlock(&sig_mu);
    while (sb != NULL) {
      usleep(10000);
      pthread_mutex_lock(&sig_mu);
      if (sig_running == sb && sig_generation == gen)
        p_mbx_sandbox_interrupt(sb);
      else
        sb = NULL;
      pthread_mutex_unlock(&sig_mu);
    }
  }
  return NULL;
}

static void after_fork_child(void) {
  sig_thread_started = 0;
  sig_depth = 0;
  atomic_store(&sig_active, 0);
  sig_running = NULL;
  sem_init(&sig_sem, 0, 0);
  pthread_mutex_init(&sig_mu, NULL);
}

typedef struct {
  int active;
  mbx_sandbox *prev;
  unsigned count;
} sig_guard;

/* Before a guarded call (under the GIL): ours becomes SIGINT's handler when this is the main
   thread and Python's handler (not SIG_DFL or SIG_IGN) is the one installed. */
static void guard_enter(sig_guard *g, mbx_sandbox *sb) {
  g->active = 0;
  if (PyThread_get_thread_ident() != main_thread_ident) return;
  if (!sig_thread_started) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);
    int rc = pthread_create(&t, &attr, interrupter, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) return; /* no thread: the run is not guarded (Ctrl-C waits for its end) */
    sig_thread_started = 1;
  }
  if (!sig_handler_ours()) return; /* the host chose SIGINT's fate (SIG_DFL, SIG_IGN): leave it */
  sig_depth++;
  atomic_store(&sig_active, 1);
  g->active = 1;
  g->count = atomic_load(&sig_count);
  pthread_mutex_lock(&sig_mu);
  g->prev = sig_running;
  sig_running = sb;
  sig_generation++;
  pthread_mutex_unlock(&sig_mu);
}

/* After it (under the GIL). Returns 1 if a SIGINT came during the call. */
static int guard_leave(sig_guard *g) {
  if (!g->active) return 0;
  pthread_mutex_lock(&sig_mu);
  sig_running = g->prev;
  sig_generation++;
  pthread_mutex_unlock(&sig_mu);
  if (--sig_depth == 0) atomic_store(&sig_active, 0);
  return atomic_load(&sig_count) != g->count;
}

/* ---- host functions ---------------------------------------------------------------------- */

/* The base of sandbox.Sandbox: the C sandbox, its busy flag (claimed under the GIL), and what
   a run needs to know of it. */
typedef struct {
  PyObject_HEAD mbx_sandbox *sb;
  int busy;
  int ctrl_c;
  PyObject *result_type; /* sandbox.Result */
} core_obj;

/* The sandbox whose run is in C on this thread (host functions are called on it). */
static _Thread_local core_obj *running_core;

/* userdata: a (name, callable) tuple the Python side keeps alive as long as the sandbox. The
   guest's arguments arrive as Python values; nothing escapes: an exception (KeyboardInterrupt
   and SystemExit too) becomes the guest's Lua error with its message. */
static mbx_status host_trampoline(void *userdata, const char *args, size_t len,
                                  mbx_host_reply *reply) {
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *pair = userdata, *name = PyTuple_GetItem(pair, 0), *fn = PyTuple_GetItem(pair, 1);
  unsigned count = atomic_load(&sig_count);
  atomic_fetch_add(&sig_in_callback, 1);
  PyObject *values = mbxpy_parse_json(args, len), *result = NULL;
  if (values != NULL && PyList_Check(values)) {
    PyObject *tuple = PyList_AsTuple(values);
    if (tuple != NULL) result = PyObject_CallObject(fn, tuple);
    Py_XDECREF(tuple);
  }
  /* A Ctrl-C chained to Python's handler while this ran and not acted on yet belongs to this
     call (checked after the flag is down: no chained signal comes later). */
  atomic_fetch_sub(&sig_in_callback, 1);
  PyObject *etype = NULL, *evalue = NULL, *etb = NULL;
  if (result == NULL) PyErr_Fetch(&etype, &evalue, &etb); /* the callback's own exception */
  if (PyErr_CheckSignals() < 0) {
    if (result != NULL)
      Py_CLEAR(result); /* the KeyboardInterrupt is the error */
    else
      PyErr_Clear(); /* consumed: the callback's exception stands */
  }
  if (result == NULL && etype != NULL) PyErr_Restore(etype, evalue, etb);
  /* The run ends "interrupted" when this returns, not on the Lua error a KeyboardInterrupt
     became: the interrupt is made here, before the interrupter thread may have acted. */
  int interrupted = atomic_load(&sig_count) != count;
  Py_XDECREF(values);
  if (result != NULL && result != Py_None) {
    mbxpy_encoder e;
    PyObject *root = PyUnicode_FromFormat("%U()", name);
    const char *root_s = NULL;
    PyObject *root_b = root ? PyUnicode_AsUTF8String(root) : NULL;
    if (root_b) root_s = PyBytes_AsString(root_b);
    mbxpy_enc_init(&e, root_s ? root_s : "value");
    if (root_s != NULL && mbxpy_enc_value(&e, result) == 0) {
      if (p_mbx_host_reply_json(reply, e.p, e.len) != MBX_OK) {
        PyObject *msg =
            PyUnicode_FromFormat("%U: the reply of %zu bytes was refused (too large)", name, e.len);
        PyObject *b = msg ? PyUnicode_AsEncodedString(msg, "utf-8", "replace") : NULL;
        if (b) p_mbx_host_reply_error(reply, PyBytes_AsString(b), (size_t)PyBytes_Size(b));
        Py_XDECREF(b);
        Py_XDECREF(msg);
      }
    } else {
      Py_CLEAR(result);
    }
    mbxpy_enc_free(&e);
    Py_XDECREF(root_b);
    Py_XDECREF(root);
  }
  if (result == NULL) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    if (text != NULL && PyUnicode_GetLength(text) == 0) Py_CLEAR(text);
    if (text == NULL && type != NULL) {
      PyErr_Clear();
      text = PyObject_GetAttrString(type, "__name__");
    }
    PyObject *b = text ? PyUnicode_AsEncodedString(text, "utf-8", "replace") : NULL;
    if (b != NULL)
      p_mbx_host_reply_error(reply, PyBytes_AsString(b), (size_t)PyBytes_Size(b));
    else
      p_mbx_host_reply_error(reply, "host function failed", 20);
    Py_XDECREF(b);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
  }
  Py_XDECREF(result);
  /* The run then ends "interrupted" when this returns, not on the Lua error the
     KeyboardInterrupt became: interrupted here, on the run's own thread (not a handler). */
  core_obj *c = running_core;
  if (interrupted && c != NULL && c->ctrl_c && c->sb != NULL) p_mbx_sandbox_interrupt(c->sb);
  PyGILState_Release(gil);
  return MBX_OK;
}

/* add_function(policy_ptr, name, pair): mbx_policy_add_function with the trampoline. */
static PyObject *py_add_function(PyObject *mod, PyObject *args) {
  (void)mod;
  unsigned long long policy;
  const char *name;
  PyObject *pair;
  if (!PyArg_ParseTuple(args, "KyO", &policy, &name, &pair)) return NULL;
  if (!PyTuple_Check(pair) || PyTuple_Size(pair) != 2) {
    PyErr_SetString(PyExc_TypeError, "add_function: a (name, callable) tuple");
    return NULL;
  }
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_status rc =
      p_mbx_policy_add_function((mbx_policy *)(uintptr_t)policy, name, host_trampoline, pair, &err);
  return Py_BuildValue("(is)", (int)rc, err.message);
}

/* ---- the sandbox's runs ------------------------------------------------------------------- */

static void core_dealloc(PyObject *self) {
  core_obj *c = (core_obj *)self;
  PyTypeObject *type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(c->result_type);
  if (c->sb != NULL && !c->busy) p_mbx_sandbox_free(c->sb);
  c->sb = NULL;
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type);
}

static int core_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((core_obj *)self)->result_type);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int core_claim(core_obj *c, const char *what) {
  if (c->sb == NULL) {
    PyObject *msg = PyUnicode_FromFormat("%s: the sandbox is closed", what);
    PyObject *e = msg ? PyObject_CallFunction(moonbox_error, "(Osi)", msg, "invalid_argument",
                                              MBX_INVALID_ARGUMENT)
                      : NULL;
    if (e) PyErr_SetObject(moonbox_error, e);
    Py_XDECREF(e);
    Py_XDECREF(msg);
    return -1;
  }
  if (c->busy) {
    PyObject *msg = PyUnicode_FromFormat(
        "%s: the sandbox is busy: another thread (or a host function of this run) is using it; "
        "a sandbox is used by one thread at a time",
        what);
    PyObject *e =
        msg ? PyObject_CallFunction(moonbox_error, "(Osi)", msg, "sandbox_busy", MBX_SANDBOX_BUSY)
            : NULL;
    if (e) PyErr_SetObject(moonbox_error, e);
    Py_XDECREF(e);
    Py_XDECREF(msg);
    return -1;
  }
  c->busy = 1;
  return 0;
}

static PyObject *api_error(int rc, const mbx_error *err, const char *what) {
  PyObject *msg =
      err->message[0]
          ? PyUnicode_DecodeUTF8(err->message,
                                 (Py_ssize_t)strnlen(err->message, sizeof err->message), "replace")
          : PyUnicode_FromFormat("%s failed", what);
  PyObject *key = status_key(rc);
  PyObject *e = msg && key ? PyObject_CallFunction(moonbox_error, "(OOi)", msg, key, rc) : NULL;
  if (e) PyErr_SetObject(moonbox_error, e);
  Py_XDECREF(e);
  Py_XDECREF(msg);
  Py_XDECREF(key);
  return NULL;
}

enum { CALL_RUN, CALL_RESUME, CALL_RESUME_ERROR };

/* One run or resume: the C call without the GIL, guarded against Ctrl-C, then the Result with
   its change set. The sandbox is claimed throughout. */
static PyObject *core_call(core_obj *c, int kind, const char *what, const char *a, size_t alen,
                           const char *name, const char *b, size_t blen) {
  if (core_claim(c, what) < 0) return NULL;
  mbx_result *res = NULL;
  mbx_error err;
  err.code = 0;
  err.message[0] = '\0';
  sig_guard g = {0, NULL, 0};
  if (c->ctrl_c) {
    guard_enter(&g, c->sb);
    /* A SIGINT Python has not acted on yet came before the run: Python's (any later one is
       counted by the guard, so a host function's KeyboardInterrupt is told from its own). */
    if (PyErr_CheckSignals() < 0) {
      guard_leave(&g);
      c->busy = 0;
      return NULL;
    }
  }
  core_obj *outer = running_core;
  running_core = c;
  mbx_status rc;
  Py_BEGIN_ALLOW_THREADS;
  if (kind == CALL_RUN)
    rc = p_mbx_run_named(c->sb, a, alen, name, b, blen, &res, &err);
  else if (kind == CALL_RESUME)
    rc = p_mbx_resume(c->sb, a, alen, &res, &err);
  else
    rc = p_mbx_resume_error(c->sb, a, alen, &res, &err);
  Py_END_ALLOW_THREADS;
  running_core = outer;
  int signalled = guard_leave(&g);
  PyObject *out = NULL;
  if (rc >= MBX_API_ERROR_BASE || res == NULL) {
    p_mbx_result_free(res);
    api_error(rc, &err, what);
  } else {
    out = make_result((PyTypeObject *)c->result_type, res);
    char *json = NULL;
    size_t n = 0;
    if (out != NULL) {
      mbx_status cs = p_mbx_sandbox_changes(c->sb, MBX_CHANGES_CONTENT, &json, &n, &err);
      result_obj *r = (result_obj *)out;
      if (cs != MBX_OK) {
        Py_CLEAR(out);
        api_error(cs, &err, "changes");
      } else {
        SET_REF(r->changes, n == 2 ? PyList_New(0) : mbxpy_parse_json(json, n));
        if (r->changes == NULL) Py_CLEAR(out);
      }
      p_mbx_free(json);
    }
    /* A SIGINT that did not end the run (it came as the run was ending): Python's turn. */
    if (signalled && rc != MBX_INTERRUPTED) PyErr_SetInterrupt();
  }
  c->busy = 0;
  return out;
}

/* Lua source (or a message) as bytes: str (UTF-8) or a bytes-like object. */
static PyObject *as_bytes(PyObject *v, const char *what) {
  if (PyUnicode_Check(v)) return PyUnicode_AsUTF8String(v);
  if (PyBytes_Check(v)) return new_ref(v);
  if (PyByteArray_Check(v) || PyMemoryView_Check(v)) return PyBytes_FromObject(v);
  PyObject *tn = PyObject_GetAttrString((PyObject *)Py_TYPE(v), "__name__");
  if (tn)
    PyErr_Format(PyExc_TypeError, "%s: expected Lua source as str or bytes, got %U", what, tn);
  Py_XDECREF(tn);
  return NULL;
}

static PyObject *core_run(PyObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"code", "inputs", "chunk_name", NULL};
  PyObject *code, *inputs = Py_None, *chunk = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:run", names, &code, &inputs, &chunk))
    return NULL;
  PyObject *src = as_bytes(code, "code"), *name_b = NULL, *out = NULL;
  if (src == NULL) return NULL;
  mbxpy_encoder e;
  mbxpy_enc_init(&e, "inputs");
  const char *name = NULL;
  if (chunk != Py_None) {
    if (!PyUnicode_Check(chunk)) {
      PyErr_SetString(PyExc_TypeError, "chunk_name: expected a str");
      goto done;
    }
    if ((name_b = PyUnicode_AsUTF8String(chunk)) == NULL) goto done;
    name = PyBytes_AsString(name_b);
    if (name[0] == '\0') name = NULL;
  }
  if (inputs != Py_None) {
    if (!PyDict_Check(inputs)) {
      PyObject *tn = PyObject_GetAttrString((PyObject *)Py_TYPE(inputs), "__name__");
      if (tn)
        PyErr_Format(PyExc_TypeError, "inputs: expected a dict of global names to values, got %U",
                     tn);
      Py_XDECREF(tn);
      goto done;
    }
    if (mbxpy_enc_value(&e, inputs) < 0) goto done;
  }
  out =
      core_call((core_obj *)self, CALL_RUN, "run", PyBytes_AsString(src), (size_t)PyBytes_Size(src),
                name, inputs == Py_None ? NULL : e.p, inputs == Py_None ? 0 : e.len);
done:
  mbxpy_enc_free(&e);
  Py_XDECREF(name_b);
  Py_DECREF(src);
  return out;
}

static PyObject *core_resume(PyObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"value", NULL};
  PyObject *value = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:resume", names, &value)) return NULL;
  mbxpy_encoder e;
  mbxpy_enc_init(&e, "value");
  PyObject *out = NULL;
  if (mbxpy_enc_value(&e, value) == 0)
    out = core_call((core_obj *)self, CALL_RESUME, "resume", e.p, e.len, NULL, NULL, 0);
  mbxpy_enc_free(&e);
  return out;
}

static PyObject *core_resume_error(PyObject *self, PyObject *args, PyObject *kw) {
  static char *names[] = {"message", NULL};
  PyObject *message;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O:resume_error", names, &message)) return NULL;
  PyObject *text = PyObject_Str(message);
  PyObject *b = text ? PyUnicode_AsEncodedString(text, "utf-8", "replace") : NULL;
  Py_XDECREF(text);
  if (b == NULL) return NULL;
  PyObject *out = core_call((core_obj *)self, CALL_RESUME_ERROR, "resume_error",
                            PyBytes_AsString(b), (size_t)PyBytes_Size(b), NULL, NULL, 0);
  Py_DECREF(b);
  return out;
}

/* _open(runtime, policy, ctrl_c, result_type): a new sandbox from a runtime and a policy (the
   Python side's pointers), without a ctypes call: a fresh sandbox is on the hot path too. */
static PyObject *core_open(PyObject *self, PyObject *args) {
  core_obj *c = (core_obj *)self;
  unsigned long long rt, policy;
  int ctrl_c;
  PyObject *rtype;
  if (!PyArg_ParseTuple(args, "KKpO", &rt, &policy, &ctrl_c, &rtype)) return NULL;
  if (c->sb != NULL) {
    PyErr_SetString(PyExc_RuntimeError, "moonbox: the sandbox is open already");
    return NULL;
  }
  mbx_error err;
  err.code = 0;
  err.message[0] = '\0';
  mbx_sandbox *sb =
      p_mbx_sandbox_new((mbx_runtime *)(uintptr_t)rt, (const mbx_policy *)(uintptr_t)policy, &err);
  if (sb == NULL)
    return api_error(err.code ? err.code : MBX_INVALID_ARGUMENT, &err, "mbx_sandbox_new");
  c->sb = sb;
  c->ctrl_c = ctrl_c;
  PyObject *old = c->result_type;
  Py_INCREF(rtype);
  c->result_type = rtype;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

/* _adopt(ptr, ctrl_c, result_type): the sandbox the Python side made. */
static PyObject *core_adopt(PyObject *self, PyObject *args) {
  core_obj *c = (core_obj *)self;
  unsigned long long ptr;
  int ctrl_c;
  PyObject *rtype;
  if (!PyArg_ParseTuple(args, "KpO", &ptr, &ctrl_c, &rtype)) return NULL;
  c->sb = (mbx_sandbox *)(uintptr_t)ptr;
  c->ctrl_c = ctrl_c;
  SET_REF(c->result_type, new_ref(rtype));
  Py_RETURN_NONE;
}

/* _with(what, fn): fn(ptr) with the sandbox claimed, released whatever fn does (a
   KeyboardInterrupt landing between a Python-level claim and its try would leave it claimed). */
static PyObject *core_with(PyObject *self, PyObject *args) {
  const char *what;
  PyObject *fn;
  if (!PyArg_ParseTuple(args, "sO", &what, &fn)) return NULL;
  core_obj *c = (core_obj *)self;
  if (core_claim(c, what) < 0) return NULL;
  PyObject *out = PyObject_CallFunction(fn, "K", (unsigned long long)(uintptr_t)c->sb);
  c->busy = 0;
  return out;
}

/* _close(): frees the sandbox (MoonboxError "sandbox_busy" while it runs; closed: nothing). */
static PyObject *core_close(PyObject *self, PyObject *unused) {
  (void)unused;
  core_obj *c = (core_obj *)self;
  if (c->sb == NULL) Py_RETURN_NONE;
  if (core_claim(c, "close") < 0) return NULL;
  mbx_sandbox *sb = c->sb;
  c->sb = NULL;
  c->busy = 0;
  p_mbx_sandbox_free(sb);
  Py_RETURN_NONE;
}

/* _ptr: the pointer (0 once closed), for calls that may come from any thread (interrupt). */
static PyObject *core_ptr(PyObject *self, void *unused) {
  (void)unused;
  return PyLong_FromUnsignedLongLong((uintptr_t)((core_obj *)self)->sb);
}

static PyMethodDef core_methods[] = {
    {"run", (PyCFunction)(void (*)(void))core_run, METH_VARARGS | METH_KEYWORDS,
     "run($self, code, inputs=None, chunk_name=None)\n--\n\n"
     "Run Lua source text; inputs (a dict) become globals first. Returns a Result for every "
     "run outcome (limits, errors and pauses included); raises MoonboxError when the library "
     "refused the call (bad inputs, source too large, poisoned or busy sandbox), TypeError or "
     "ValueError for a value of the wrong type."},
    {"resume", (PyCFunction)(void (*)(void))core_resume, METH_VARARGS | METH_KEYWORDS,
     "resume($self, value=None)\n--\n\nContinue a paused run: the pending call returns value."},
    {"resume_error", (PyCFunction)(void (*)(void))core_resume_error, METH_VARARGS | METH_KEYWORDS,
     "resume_error($self, message)\n--\n\n"
     "Continue a paused run: the pending call raises a Lua error with this message."},
    {"_adopt", core_adopt, METH_VARARGS, NULL},
    {"_with", core_with, METH_VARARGS, NULL},
    {"_open", core_open, METH_VARARGS, NULL},
    {"_close", core_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef core_getset[] = {{"_ptr", core_ptr, NULL, NULL, NULL},
                                    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot core_slots[] = {{Py_tp_dealloc, core_dealloc},
                                   {Py_tp_traverse, core_traverse},
                                   {Py_tp_methods, core_methods},
                                   {Py_tp_getset, core_getset},
                                   {0, NULL}};

static PyType_Spec core_spec = {"moonbox._moonbox.Core", sizeof(core_obj), 0,
                                Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                                core_slots};

/* ---- module functions --------------------------------------------------------------------- */

static PyObject *py_to_json(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *value;
  const char *path = "value";
  if (!PyArg_ParseTuple(args, "O|s", &value, &path)) return NULL;
  mbxpy_encoder e;
  mbxpy_enc_init(&e, path);
  PyObject *out =
      mbxpy_enc_value(&e, value) == 0 ? PyBytes_FromStringAndSize(e.p, (Py_ssize_t)e.len) : NULL;
  mbxpy_enc_free(&e);
  return out;
}

static PyObject *py_from_json(PyObject *mod, PyObject *text) {
  (void)mod;
  PyObject *b = PyUnicode_Check(text) ? PyUnicode_AsUTF8String(text) : PyBytes_FromObject(text);
  if (b == NULL) return NULL;
  PyObject *out = mbxpy_parse_json(PyBytes_AsString(b), (size_t)PyBytes_Size(b));
  Py_DECREF(b);
  return out;
}

/* init(handle, MoonboxError, (LuaFunction, LuaThread, LuaUserdata, LuaCycle)) */
static PyObject *py_init(PyObject *mod, PyObject *args) {
  (void)mod;
  unsigned long long handle;
  PyObject *err_cls, *forms;
  if (!PyArg_ParseTuple(args, "KOO", &handle, &err_cls, &forms)) return NULL;
  if (!PyTuple_Check(forms) || PyTuple_Size(forms) != 4) {
    PyErr_SetString(PyExc_ValueError, "init: four form classes");
    return NULL;
  }
  void *h = (void *)(uintptr_t)handle;
#define RESOLVE(name)                                                                              \
  if ((p_##name = (__typeof__(p_##name))dlsym(h, #name)) == NULL) {                                \
    PyErr_Format(PyExc_ImportError, "moonbox: the library has no %s (an older libmoonbox?)",       \
                 #name);                                                                           \
    return NULL;                                                                                   \
  }
  MBX_FUNCTIONS(RESOLVE)
#undef RESOLVE
  SET_REF(moonbox_error, new_ref(err_cls));
  if (mbxpy_values_init(forms) < 0) return NULL;
  for (int code = 0; code <= MBX_UNSUPPORTED; code++) {
    const char *key = p_mbx_status_key((mbx_status)code);
    if (key != NULL && status_keys[code] == NULL) {
      status_keys[code] = PyUnicode_InternFromString(key);
      if (status_keys[code] == NULL) return NULL;
    }
  }
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"init", py_init, METH_VARARGS, NULL},
    {"to_json", py_to_json, METH_VARARGS, "The JSON text (bytes) of a Python value."},
    {"from_json", py_from_json, METH_O, "The Python value of JSON text the library produced."},
    {"add_function", py_add_function, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "moonbox._moonbox", NULL, -1, module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__moonbox(void); /* the one exported symbol */
PyMODINIT_FUNC PyInit__moonbox(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  empty_bytes = PyBytes_FromStringAndSize("", 0);
  PyObject *threading = PyImport_ImportModule("threading");
  PyObject *main_thread = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
  PyObject *ident = main_thread ? PyObject_GetAttrString(main_thread, "ident") : NULL;
  if (ident != NULL) main_thread_ident = PyLong_AsUnsignedLong(ident);
  Py_XDECREF(ident);
  Py_XDECREF(main_thread);
  Py_XDECREF(threading);
  if (empty_bytes == NULL || PyErr_Occurred() || sem_init(&sig_sem, 0, 0) != 0) goto fail;
  pthread_atfork(NULL, NULL, after_fork_child);
  result_base_type = (PyTypeObject *)PyType_FromSpec(&result_spec);
  PyObject *core = PyType_FromSpec(&core_spec);
  if (result_base_type == NULL || core == NULL ||
      PyModule_AddObject(m, "ResultBase", new_ref((PyObject *)result_base_type)) < 0 ||
      PyModule_AddObject(m, "Core", core) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
