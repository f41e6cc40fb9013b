/* host/cli/repl_entry.h -- one entry of `moonbox repl`: lines gathered into a chunk as lua -i
   gathers them, and the chunk that runs it and prints its values. */
#ifndef MBX_HOST_CLI_REPL_ENTRY_H
#define MBX_HOST_CLI_REPL_ENTRY_H

#include <stddef.h>

#include "moonbox.h"

/* The chunk name of every entry: errors read "stdin:1: ...", as under lua -i. */
#define MBXH_REPL_CHUNK "stdin"

/* The text of the entry being typed (its lines joined with "\n"). */
typedef struct mbxH_repl_entry {
  char *text;
  size_t len, cap;
  int lines; /* lines added so far (0: the next line is the first) */
} mbxH_repl_entry;

/* What to do after a line was added. */
typedef enum mbxH_repl_verdict {
  MBXH_REPL_RUN,    /* the entry is complete: run *code (mbxH_repl_add_line) */
  MBXH_REPL_MORE,   /* the chunk ends too early (the parser's "near <eof>"): ask for a line */
  MBXH_REPL_SYNTAX, /* a syntax error: msg holds it ("stdin:LINE: message"); entry cleared */
  MBXH_REPL_FAILED  /* too large, a compile limit, out of memory: msg says; entry cleared */
} mbxH_repl_verdict;

/* 1 when a parser message says the chunk ended too early (it ends in "<eof>", as lua.c's
   incomplete() tests: "'end' expected near <eof>"; not "<eof> expected near '='"). */
int mbxH_repl_incomplete(const char *message);

/*
** The chunk that runs src as an entry of the session and prints what it returns with the
** guest's own print, as lua -i does: nothing when it returns no value, tab-separated
** tostring()s otherwise (print is looked up after the entry ran; select is read before it,
** so an entry that removes select still has its values counted; after that, values are
** printed when the first is not nil). src runs as the body of a
** vararg function that starts on line 1, so its line numbers are the typed ones. Returns a
** malloc'd NUL-terminated text (length in *out_len), or NULL when out of memory.
*/
char *mbxH_repl_wrap(const char *src, size_t len, size_t *out_len);
/* The bytes mbxH_repl_wrap adds to an entry (the source limit must leave room for them). */
size_t mbxH_repl_wrap_extra(void);

/*
** Adds one typed line (without its newline) to the entry and decides, compiling with
** mbx_check under the policy (nothing runs): the first line is tried as "return LINE" first
** (an expression's values are printed), a first line "=EXPR" is "return EXPR"; otherwise the
** lines so far as a chunk. On MBXH_REPL_RUN, *code (malloc'd, *code_len bytes) is the wrapped
** chunk to run and the entry is cleared. On SYNTAX or FAILED, msg holds the message and the
** entry is cleared. Needs the C stack mbx_check needs (as mbx_run: the REPL's run thread).
*/
mbxH_repl_verdict mbxH_repl_add_line(mbxH_repl_entry *e, const mbx_policy *p, const char *line,
                                     size_t len, char **code, size_t *code_len, char *msg,
                                     size_t msg_size);

/*
** The traceback of a wrapped entry as lua -i shows one: the wrapper's main chunk (the last
** frame) is dropped and the entry's function ("stdin:L: in function <stdin:1>") reads as
** "stdin:L: in main chunk". A traceback of another shape is copied as it is. Returns a
** malloc'd text (*out_len bytes), or NULL when out of memory.
*/
char *mbxH_repl_traceback(const char *tb, size_t len, size_t *out_len);

/* Forgets the lines typed so far (Ctrl-C at a ">>" prompt, end of input). */
void mbxH_repl_entry_clear(mbxH_repl_entry *e);
/* Releases the entry's text. */
void mbxH_repl_entry_free(mbxH_repl_entry *e);

#endif /* MBX_HOST_CLI_REPL_ENTRY_H */
