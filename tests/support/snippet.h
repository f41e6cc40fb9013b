/* tests/support/snippet.h -- running Lua snippets through the public API in unit tests. */
#ifndef MBX_TESTS_SNIPPET_H
#define MBX_TESTS_SNIPPET_H

#include <stddef.h>
#include <stdint.h>

#include "include/moonbox.h"

/* What a run produced, copied out of the mbx_result so tests can assert after freeing it. */
typedef struct snippet_outcome {
  mbx_status status;
  char value[8192]; /* the value JSON when the run succeeded, else the full error message */
  char out[8192];   /* captured stdout (raw bytes, NUL-terminated) */
  size_t out_len;
  char err[8192]; /* captured stderr */
  size_t err_len;
  mbx_usage usage;
} snippet_outcome;

/* Limits of one run; SNIPPET_KEEP leaves the library default. */
#define SNIPPET_KEEP UINT64_MAX
typedef struct snippet_limits {
  uint64_t memory, instructions, time_ms;
} snippet_limits;
extern const snippet_limits snippet_defaults;

/* The runtime the helpers use: created by snippet_setup, freed by snippet_teardown (cmocka
   group setup/teardown functions). */
extern mbx_runtime *snippet_runtime;
int snippet_setup(void **state);
int snippet_teardown(void **state);

/* Run code in sb and fill *o. Returns the run status; fails the test on an API status. */
mbx_status snippet_run_in(mbx_sandbox *sb, const char *code, snippet_outcome *o);
/* A sandbox with the default policy, or with one limit changed (which == 0: none). */
mbx_sandbox *snippet_sandbox_with(mbx_limit which, uint64_t value);
mbx_sandbox *snippet_sandbox(void);
/* A sandbox under these limits. */
mbx_sandbox *snippet_sandbox_limits(snippet_limits lim);
/* Run code in a fresh sandbox under lim and fill *o. Fails the test on an API status. */
mbx_status snippet_run_with(snippet_limits lim, const char *code, snippet_outcome *o);
/* Under lim the snippet ends with this status, and its error message contains the fragment
   (NULL: not checked). Returns the outcome for further checks. */
const snippet_outcome *snippet_check_ends(snippet_limits lim, const char *code, mbx_status status,
                                          const char *fragment);
/* Run code in a fresh default sandbox. */
mbx_status snippet_run(const char *code, snippet_outcome *o);
/* The snippet succeeds and returns exactly this JSON. */
void snippet_check_value(const char *code, const char *json);
/* The snippet ends with this status and its error message contains the fragment. */
void snippet_check_error(const char *code, mbx_status status, const char *fragment);

#endif
