/* vm/chunk.h -- a reader of Lua 5.4.4 binary chunks (lua_dump output), bounds-checked. */
#ifndef MBX_VM_CHUNK_H
#define MBX_VM_CHUNK_H

/*
** mbxV_chunk_read decodes the bytes lua_dump wrote for a function (Debian's Lua 5.4.4: 4-byte
** instructions, 8-byte lua_Integer and lua_Number, this machine's byte order) into a tree of
** prototypes: instructions with the source line of each, constants, upvalue descriptors with
** their names, nested prototypes and the rest of the debug information. It is written from
** the format's description (ldump.c/lundump.c of 5.4.4 were read, not copied) and uses no Lua
** header: the opcodes are decoded from the 5.4 instruction layout below.
**
** The input is treated as hostile (the static check feeds it bytes we dumped ourselves, the
** fuzzers feed it anything): every length is checked against the bytes left before anything
** is allocated, so the tree costs O(input) host memory; nesting is capped at
** MBXV_CHUNK_MAX_DEPTH prototypes (the recursion's C stack is bounded); a count or line
** that does not fit an int, a truncated input, trailing bytes, an unknown constant tag, line
** information of the wrong size or an absolute line entry that is missing are all errors
** with a message naming the offset. Nothing is executed: this is a reader, not a loader (Lua
** 5.4.4's own loader trusts its input and crashes on malformed chunks, THREATS E4).
*/

#include <stddef.h>
#include <stdint.h>

/* Prototype nesting allowed (Lua's parser stops at 200 levels of C recursion). */
#define MBXV_CHUNK_MAX_DEPTH 200

/* Constant tags as lua_dump writes them (a type and a variant). */
typedef enum mbxV_chunk_ktype {
  MBXV_K_NIL = 0x00,
  MBXV_K_FALSE = 0x01,
  MBXV_K_TRUE = 0x11,
  MBXV_K_INT = 0x03,
  MBXV_K_FLOAT = 0x13,
  MBXV_K_SHORTSTR = 0x04,
  MBXV_K_LONGSTR = 0x14
} mbxV_chunk_ktype;

typedef struct mbxV_chunk_const {
  mbxV_chunk_ktype type;
  int64_t i;     /* MBXV_K_INT */
  double n;      /* MBXV_K_FLOAT */
  const char *s; /* strings: borrowed from the input (not NUL-terminated); NULL for a null one */
  size_t len;
} mbxV_chunk_const;

typedef struct mbxV_chunk_upval {
  uint8_t instack; /* 1: a register of the enclosing function; 0: one of its upvalues */
  uint8_t idx;     /* that register or upvalue */
  uint8_t kind;
  const char *name; /* from the debug information, borrowed; NULL when stripped */
  size_t name_len;
} mbxV_chunk_upval;

typedef struct mbxV_chunk_local {
  const char *name; /* borrowed; NULL for a null name */
  size_t name_len;
  int startpc, endpc;
} mbxV_chunk_local;

typedef struct mbxV_chunk_proto {
  const char *source; /* borrowed; NULL when the same as the parent's, or stripped */
  size_t source_len;
  int linedefined, lastlinedefined;
  uint8_t numparams, is_vararg, maxstacksize;
  size_t ncode;
  uint32_t *code; /* ncode instructions */
  size_t code_at; /* offset of code[0] in the input (vm/load.c patches instructions there) */
  int *lines;     /* ncode source lines, or NULL when the chunk has no line information */
  size_t nk;
  mbxV_chunk_const *k;
  size_t nupvals;
  mbxV_chunk_upval *upvals;
  size_t nprotos;
  struct mbxV_chunk_proto *protos;
  size_t nlocals;
  mbxV_chunk_local *locals;
} mbxV_chunk_proto;

typedef struct mbxV_chunk {
  uint8_t main_upvalues; /* the byte before the main function: its upvalue count */
  mbxV_chunk_proto main;
} mbxV_chunk;

/* Read len bytes of a chunk into *out (zeroed first; strings point into bytes, which must
   outlive it). Returns 0, or -1 with a message in why (e.g. "offset 17: truncated constant
   count") and *out empty; -2 when host memory ran out. Release with mbxV_chunk_free. */
int mbxV_chunk_read(const void *bytes, size_t len, mbxV_chunk *out, char *why, size_t why_size);
void mbxV_chunk_free(mbxV_chunk *c);

/* The 5.4 instruction layout: opcode in bits 0-6, A in 7-14, k in 15, B in 16-23, C in 24-31;
   Bx (17 bits) and sBx from bit 15, Ax and sJ (25 bits) from bit 7. */
static inline unsigned mbxV_op(uint32_t i) {
  return i & 0x7fu;
}
static inline unsigned mbxV_arg_a(uint32_t i) {
  return (i >> 7) & 0xffu;
}
static inline unsigned mbxV_arg_k(uint32_t i) {
  return (i >> 15) & 1u;
}
static inline unsigned mbxV_arg_b(uint32_t i) {
  return (i >> 16) & 0xffu;
}
static inline unsigned mbxV_arg_c(uint32_t i) {
  return (i >> 24) & 0xffu;
}
static inline unsigned mbxV_arg_bx(uint32_t i) {
  return i >> 15;
}
static inline int mbxV_arg_sbx(uint32_t i) {
  return (int)(i >> 15) - 0xffff;
}
static inline unsigned mbxV_arg_ax(uint32_t i) {
  return i >> 7;
}
static inline int mbxV_arg_sj(uint32_t i) {
  return (int)(i >> 7) - 0xffffff;
}

/* The opcodes of 5.4.4, numbered as its lopcodes.h numbers them. */
/* clang-format off */
#define MBXV_OPCODES(X) \
  X(MOVE) X(LOADI) X(LOADF) X(LOADK) X(LOADKX) X(LOADFALSE) X(LFALSESKIP) X(LOADTRUE) \
  X(LOADNIL) X(GETUPVAL) X(SETUPVAL) X(GETTABUP) X(GETTABLE) X(GETI) X(GETFIELD) \
  X(SETTABUP) X(SETTABLE) X(SETI) X(SETFIELD) X(NEWTABLE) X(SELF) X(ADDI) X(ADDK) \
  X(SUBK) X(MULK) X(MODK) X(POWK) X(DIVK) X(IDIVK) X(BANDK) X(BORK) X(BXORK) X(SHRI) \
  X(SHLI) X(ADD) X(SUB) X(MUL) X(MOD) X(POW) X(DIV) X(IDIV) X(BAND) X(BOR) X(BXOR) \
  X(SHL) X(SHR) X(MMBIN) X(MMBINI) X(MMBINK) X(UNM) X(BNOT) X(NOT) X(LEN) X(CONCAT) \
  X(CLOSE) X(TBC) X(JMP) X(EQ) X(LT) X(LE) X(EQK) X(EQI) X(LTI) X(LEI) X(GTI) X(GEI) \
  X(TEST) X(TESTSET) X(CALL) X(TAILCALL) X(RETURN) X(RETURN0) X(RETURN1) X(FORLOOP) \
  X(FORPREP) X(TFORPREP) X(TFORCALL) X(TFORLOOP) X(SETLIST) X(CLOSURE) X(VARARG) \
  X(VARARGPREP) X(EXTRAARG)
/* clang-format on */

typedef enum mbxV_opcode {
#define MBXV_OPCODE_ENUM_(name) MBXV_OP_##name,
  MBXV_OPCODES(MBXV_OPCODE_ENUM_)
#undef MBXV_OPCODE_ENUM_
      MBXV_OP_COUNT
} mbxV_opcode;

/* "GETTABUP"; "?" for a number outside the table. */
const char *mbxV_op_name(unsigned op);

#endif
