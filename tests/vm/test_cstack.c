/* tests/vm/test_cstack.c -- unit tests of vm/cstack.c: the C stack guard holds on the smallest
   thread stack the docs allow, and bounds the depth below mbx_run's frame on any stack. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cmocka.h>

#include "include/moonbox.h"
#include "vm/cstack.h"

/* The worst hostile chains found (issue 9, A.1): each must end in a clean error. */

/* Coroutines closing each other, each __close handler nesting C re-entries first (a load
   reader, a gsub callback, a sort comparator, table.concat through __index, tostring and
   string.format through __tostring, pcall, xpcall). SIGSEGV on 5.4.4 without the guard. */
static const char close_chain[] =
    "local nesters = {\n"
    "  function(f) local done, r = false\n"
    "    local c, e = load(function() if done then return nil end done = true r = f()\n"
    "      return 'return 1' end)\n"
    "    if not c then error(e, 0) end return r end,\n"
    "  function(f) local r string.gsub('x', 'x', function() r = f() return '' end) return r end,\n"
    "  function(f) local r table.sort({2, 1}, function(a, b) r = r or f() return a < b end)\n"
    "    return r end,\n"
    "  function(f) local r table.concat(setmetatable({}, {__index = function() r = f()\n"
    "    return '' end}), '', 1, 1) return r end,\n"
    "  function(f) local r string.format('%s', setmetatable({}, {__tostring = function()\n"
    "    r = f() return '' end})) return r end,\n"
    "  function(f) local r tostring(setmetatable({}, {__tostring = function() r = f()\n"
    "    return '' end})) return r end,\n"
    "  function(f) local ok, r = pcall(f) if not ok then error(r, 0) end return r end,\n"
    "  function(f) local ok, r = xpcall(f, function(m) return m end)\n"
    "    if not ok then error(r, 0) end return r end,\n"
    "}\n"
    "local function nest(k, f)\n"
    "  if k == 0 then return f() end\n"
    "  return nesters[k % #nesters + 1](function() return nest(k - 1, f) end)\n"
    "end\n"
    "local prev\n"
    "for i = 1, 100 do\n"
    "  local p = prev\n"
    "  local co = coroutine.create(function()\n"
    "    local guard <close> = setmetatable({}, {__close = function()\n"
    "      if p then nest(120, function()\n"
    "        local ok, err = coroutine.close(p) if not ok then error(err, 0) end end) end\n"
    "    end})\n"
    "    coroutine.yield()\n"
    "  end)\n"
    "  assert(coroutine.resume(co))\n"
    "  prev = co\n"
    "end\n"
    "local ok, err = coroutine.close(prev)\n"
    "if not ok then error(err, 0) end\n";

/* The same chain, but what each handler nests is Lua's own re-entry (__index functions, which
   no moonbox code sees) up to Lua's 200 levels: it must fit in the reserve under the floor. */
static const char close_chain_unchecked[] =
    "local function deep(n)\n"
    "  local t = setmetatable({}, {__index = function(t, k)\n"
    "    if k == 0 then return 0 end return t[k - 1] end})\n"
    "  return t[n]\n"
    "end\n"
    "local function nest(k, f)\n"
    "  if k == 0 then return f() end\n"
    "  local r string.gsub('x', 'x', function() r = nest(k - 1, f) return '' end) return r\n"
    "end\n"
    "local prev\n"
    "for i = 1, 100 do\n"
    "  local p = prev\n"
    "  local co = coroutine.create(function()\n"
    "    local guard <close> = setmetatable({}, {__close = function()\n"
    "      pcall(deep, 190)\n"
    "      if p then nest(30, function() pcall(deep, 190)\n"
    "        local ok, err = coroutine.close(p) if not ok then error(err, 0) end end) end\n"
    "    end})\n"
    "    coroutine.yield()\n"
    "  end)\n"
    "  assert(coroutine.resume(co))\n"
    "  prev = co\n"
    "end\n"
    "local ok, err = coroutine.close(prev)\n"
    "if not ok then error(err, 0) end\n";

/* Nested gsub callbacks and load readers (the most stack per level), coroutine.wrap, and an
   xpcall handler that fails at the deepest point. */
static const char gsub_nest[] =
    "local function f(n) if n == 0 then return '' end\n"
    "  return (string.gsub('x', 'x', function() return f(n - 1) end)) end\n"
    "f(100000)\n";
static const char reader_nest[] =
    "local function reader(n) local done = false return function()\n"
    "  if done then return nil end done = true\n"
    "  if n > 0 then local f, e = load(reader(n - 1)) if not f then error(e, 0) end end\n"
    "  return 'return 1' end end\n"
    "local f, e = load(reader(100000)) if not f then error(e, 0) end\n";
static const char wrap_nest[] =
    "local function f(n) if n == 0 then return 0 end return coroutine.wrap(f)(n - 1) + 1 end\n"
    "f(100000)\n";
static const char handler_at_depth[] =
    "local function f(n) if n == 0 then error('bottom') end\n"
    "  return (string.gsub('x', 'x', function() return f(n - 1) end)) end\n"
    "local ok, e = xpcall(f, function(m) return f(100000) end, 100000)\n"
    "error(e, 0)\n";

typedef struct chain {
  const char *name;
  const char *code;
  const char *message; /* the error says this */
} chain;

static const chain chains[] = {
    {"close_chain", close_chain, "C stack overflow"},
    {"close_chain_unchecked", close_chain_unchecked, "C stack overflow"},
    {"gsub_nest", gsub_nest, "C stack overflow"},
    {"reader_nest", reader_nest, "C stack overflow"},
    {"wrap_nest", wrap_nest, "C stack overflow"},
    /* A handler that fails again is called again, until Lua's own bound. */
    {"handler_at_depth", handler_at_depth, "error in error handling"},
};

typedef struct job {
  const char *code;
  mbx_status status;
  char message[8192]; /* errors are cut at 4096 bytes */
  uintptr_t entry;    /* the frame that called mbx_run */
} job;

static void *run_job(void *arg) {
  job *j = arg;
  mbx_error err = {0};
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  assert_non_null(rt);
  assert_non_null(p);
  mbx_policy_set_limit(p, MBX_LIMIT_MEMORY, 64u << 20);
  mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0);
  mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 60000); /* generous: the machine is shared */
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  mbx_result *res = NULL;
  j->entry = (uintptr_t)__builtin_frame_address(0);
  j->status = mbx_run(sb, j->code, strlen(j->code), NULL, 0, &res, &err);
  if (res) {
    const char *m = mbx_result_error_message(res, NULL);
    snprintf(j->message, sizeof j->message, "%s", m ? m : "");
  } else {
    snprintf(j->message, sizeof j->message, "%s", err.message);
  }
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return NULL;
}

static void on_thread(pthread_attr_t *attr, job *j) {
  pthread_t t;
  assert_int_equal(pthread_create(&t, attr, run_job, j), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
}

static void expect_overflow(const chain *c, const job *j) {
  if (j->status != MBX_RUNTIME_ERROR || strstr(j->message, c->message) == NULL)
    fail_msg("%s: status %s, message '%.300s'", c->name, mbx_status_key(j->status), j->message);
}

/* The smallest thread stack the docs allow runs every chain to a clean error. */
static void chains_end_cleanly_on_the_smallest_stack(void **state) {
  (void)state;
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, MBXV_CSTACK_THREAD_MIN), 0);
  for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
    job j = {.code = chains[i].code};
    on_thread(&attr, &j);
    expect_overflow(&chains[i], &j);
  }
  pthread_attr_destroy(&attr);
}

/* A host on a stack of its own (here a painted one): whatever the stack's size, no chain goes
   deeper below mbx_run's frame than the guest's depth plus the reserve. */
static void depth_is_bounded_below_the_entry_frame(void **state) {
  (void)state;
  size_t size = 4 * MBXV_CSTACK_NEEDED + (1u << 20);
  unsigned char *stack =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(stack != MAP_FAILED);
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstack(&attr, stack, size), 0);
  for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
    memset(stack, 0xA5, size);
    job j = {.code = chains[i].code};
    on_thread(&attr, &j);
    expect_overflow(&chains[i], &j);
    size_t untouched = 0;
    while (untouched < size && stack[untouched] == 0xA5)
      untouched++;
    size_t depth = j.entry - ((uintptr_t)stack + untouched);
    if (depth > MBXV_CSTACK_NEEDED)
      fail_msg("%s went %zu KiB below mbx_run's frame; the bound is %zu KiB", chains[i].name,
               depth >> 10, (size_t)MBXV_CSTACK_NEEDED >> 10);
    /* And the guard is what stopped it, not a smaller structural limit: the guest used most
       of its depth. */
    if (i == 0 && depth < MBXV_CSTACK_DEPTH)
      fail_msg("%s stopped %zu KiB below the entry, before the floor", chains[i].name, depth >> 10);
  }
  pthread_attr_destroy(&attr);
  munmap(stack, size);
}

/* A host that switched to a stack of its own (a fiber: makecontext), where pthread's bounds
   say nothing: mbx_run cannot see how much is free and does not refuse, and the depth bound
   below its frame is all that holds. The fiber's stack is what the docs ask for below the
   call plus room for the host's frames above it, over a guard page that turns any overrun
   into a fault. */
#ifndef MBXV_CSTACK_SANITIZED
static ucontext_t host_context, fiber_context;
static job *fiber_job;

static void fiber_main(void) {
  run_job(fiber_job);
}
#endif

static void chains_end_cleanly_on_a_switched_stack(void **state) {
  (void)state;
#ifdef MBXV_CSTACK_SANITIZED
  /* Neither sanitizer follows makecontext stacks: ASan reports false overflows after Lua's
     longjmps there ("doesn't fully support makecontext"), TSan loses the thread's state. */
  skip();
#else
  size_t guard = 64u << 10, size = MBXV_CSTACK_NEEDED + (256u << 10);
  unsigned char *region =
      mmap(NULL, guard + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(region != MAP_FAILED);
  assert_int_equal(mprotect(region, guard, PROT_NONE), 0);
  for (size_t i = 0; i < sizeof chains / sizeof chains[0]; i++) {
    job j = {.code = chains[i].code};
    fiber_job = &j;
    assert_int_equal(getcontext(&fiber_context), 0);
    fiber_context.uc_stack.ss_sp = region + guard;
    fiber_context.uc_stack.ss_size = size;
    fiber_context.uc_link = &host_context;
    makecontext(&fiber_context, fiber_main, 0);
    assert_int_equal(swapcontext(&host_context, &fiber_context), 0);
    expect_overflow(&chains[i], &j);
  }
  munmap(region, guard + size);
#endif
}

static void *read_free(void *arg) {
  *(size_t *)arg = mbxV_cstack_free();
  return NULL;
}

/* The free figure is the thread's, below the caller's frame. */
static void free_stack_is_measured_on_the_thread(void **state) {
  (void)state;
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, 2u << 20), 0);
  size_t got = 0;
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, read_free, &got), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  pthread_attr_destroy(&attr);
  assert_true(got > (1u << 20));
  assert_true(got < (2u << 20));
}

/* On the smallest stack mbx_run is not refused: the docs' minimum is really enough. */
static void the_smallest_stack_is_not_refused(void **state) {
  (void)state;
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, MBXV_CSTACK_THREAD_MIN), 0);
  job j = {.code = "return 1"};
  on_thread(&attr, &j);
  assert_int_equal(j.status, MBX_OK);
  pthread_attr_destroy(&attr);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(free_stack_is_measured_on_the_thread),
      cmocka_unit_test(the_smallest_stack_is_not_refused),
      cmocka_unit_test(chains_end_cleanly_on_the_smallest_stack),
      cmocka_unit_test(depth_is_bounded_below_the_entry_frame),
      cmocka_unit_test(chains_end_cleanly_on_a_switched_stack),
  };
  return cmocka_run_group_tests_name("vm/cstack", tests, NULL, NULL);
}
