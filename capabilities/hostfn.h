/* capabilities/hostfn.h -- host functions a policy grants: names, kinds, callbacks, replies.
   No Lua here. */
#ifndef MBX_CAPABILITIES_HOSTFN_H
#define MBX_CAPABILITIES_HOSTFN_H

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h" /* mbxC_fn_kind, mbxC_call_result */
#include "include/moonbox.h"

struct mbxC_native; /* capabilities/ffi.h */

/* One granted function. */
typedef struct mbxC_hostfn {
  char *name; /* malloc'd, validated dotted path: "tools.search" */
  mbxC_fn_kind kind;
  mbx_host_fn fn;             /* SYNC only */
  void *userdata;             /* SYNC only: borrowed from the host, passed back untouched */
  struct mbxC_native *native; /* NATIVE only: one reference, shared with the table's copies */
} mbxC_hostfn;

/* What a name of a granted function may be. capabilities/ knows no Lua: the host passes the
   rules of the language it installs the functions into (host/policy_api.c: Lua identifiers,
   not reserved words, not one of the sandbox's globals at the top level). */
typedef struct mbxC_name_rules {
  int (*is_name)(const char *s, size_t n);     /* one dotted part is a valid name */
  int (*is_reserved)(const char *s, size_t n); /* ... is a reserved word (for the message) */
  const char *const *globals;                  /* names the first part must not take */
  size_t global_count;
  /* The last part of a dotted name (never the first: that one is a global) may instead be a
     table key the guest writes with brackets (tools.mem["create-entities"]); NULL = no. */
  int (*is_key)(const char *s, size_t n);
} mbxC_name_rules;

/* The table of a policy (and its copy in every sandbox's port). */
typedef struct mbxC_hostfn_table {
  mbxC_hostfn *fns;
  size_t count, cap;
  const mbxC_name_rules *rules; /* borrowed, static; NULL refuses every name */
  /* A copy's entries and names are one block (fns): a sandbox's copy is one allocation, not
     one per name. An add to a packed table unpacks it first. */
  int packed;
} mbxC_hostfn_table;

/* At most this many functions per policy, names at most this long, at most this many dotted
   parts: installing them is per-sandbox work done at every mbx_sandbox_new. */
#define MBXC_MAX_HOSTFNS 256
#define MBXC_MAX_HOSTFN_NAME 128
#define MBXC_MAX_HOSTFN_DEPTH 4

/* Validate name and add it. Returns 0, MBXC_HOSTFN_INVALID (why says what was wrong: not a
   dotted identifier path, a keyword, a built-in's name, a duplicate or a clash with an
   existing path) or MBXC_HOSTFN_NO_MEMORY. Nothing changes on failure. */
#define MBXC_HOSTFN_INVALID (-1)
#define MBXC_HOSTFN_NO_MEMORY (-2)
int mbxC_hostfn_add(mbxC_hostfn_table *t, const char *name, mbxC_fn_kind kind, mbx_host_fn fn,
                    void *userdata, char *why, size_t why_size);
/* Validate name and add a native binding under it (same names, same namespace as the host
   functions). On success the table takes over the caller's reference to native; on failure
   the caller keeps it. Returns as mbxC_hostfn_add. */
int mbxC_hostfn_add_native(mbxC_hostfn_table *t, const char *name, struct mbxC_native *native,
                           char *why, size_t why_size);
/* Deep copy (names duplicated, into one block with the entries; native bindings shared by
   reference). Returns 0 or -1 when out of memory (dst is then empty). */
int mbxC_hostfn_copy(mbxC_hostfn_table *dst, const mbxC_hostfn_table *src);
/* Release what t owns; t is then empty but valid. */
void mbxC_hostfn_clear(mbxC_hostfn_table *t);

/* The reply a callback fills (opaque to hosts: moonbox.h). Its buffer belongs to the
   sandbox's port and is reused from call to call. */
struct mbx_host_reply {
  char *buf;
  size_t len, cap;
  enum { MBXC_REPLY_NONE, MBXC_REPLY_JSON, MBXC_REPLY_ERROR } kind;
  size_t refused_len; /* a reply past its cap: its length, for the message */
};

/* Call fn (a SYNC entry) with the arguments' JSON; the reply's bytes stay in r until the next
   call. Never raises (the callback runs outside any Lua frame's control: the trampoline
   raises afterwards). */
mbxC_call_result mbxC_hostfn_call(const mbxC_hostfn *fn, struct mbx_host_reply *r, const char *args,
                                  size_t args_len, const char **reply, size_t *reply_len);
void mbxC_host_reply_free(struct mbx_host_reply *r);

#endif
