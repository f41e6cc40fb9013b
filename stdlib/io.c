/* stdlib/io.c -- the io guests see: files of the sandbox's view through the port (io.open,
   io.lines, file methods), io.write and io.stdout/io.stderr into the captured streams, and the
   small fs module (list, stat, mkdir, exists, remove). Nothing here names a host path: the
   port serves virtual paths only. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "capabilities/port.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/output.h"
#include "vm/vm.h"

#define FILE_TYPE "FILE*"
/* Bytes one port read or write moves at most; the read buffer of a file. */
#define IO_CHUNK 4096
/* Bytes copied per charged instruction, and how often the meter charges. */
#define IO_BYTES_PER_INSN 16
#define IO_METER_BATCH (64u << 10)
/* What every port operation costs at least, so a loop of opens or stats is metered. */
#define IO_OP_COST 64

/* KIND_POPEN_R: a program's stdout, read from the Lua string in the user value (the program
   ran to completion in io.popen); KIND_POPEN_W: writes collected in the user value (a table of
   strings) and given to the program as its stdin at close; KIND_STDIN: the host's bytes
   through the port's stdin_read. */
enum {
  KIND_FILE = 0,
  KIND_STDOUT = 1,
  KIND_STDERR = 2,
  KIND_POPEN_R = 3,
  KIND_POPEN_W = 4,
  KIND_STDIN = 5
};

/* What io.popen(cmd, "w") collects at most before close runs the program. */
#define IO_POPEN_MAX_STDIN (64u << 20)

/* io.input() and io.output() live in a table shared as upvalue 1 of the io functions that
   use them, at integer keys: its array part, so no string hash (whose seed differs between
   states) decides when a table grows, and deterministic sandboxes keep one heap layout. */
#define IO_CURRENT lua_upvalueindex(1)
#define IO_INPUT 1
#define IO_OUTPUT 2

typedef struct lfile {
  int kind;
  int closed;
  int handle;
  int readable, writable;
  const char *pdata;    /* KIND_POPEN_R: the output (anchored by the user value) */
  size_t plen, ppos;    /* its length and read position; KIND_POPEN_W: bytes collected */
  int pcode, psignal;   /* KIND_POPEN_R: how the program ended */
  size_t rpos, rlen;    /* unread bytes buf[rpos..rlen) came from the port ahead of the guest */
  uint64_t stdin_epoch; /* KIND_STDIN: the port's stdin epoch those bytes came under */
  /* IO_CHUNK bytes of read-ahead, only for a readable file: io.stdout and io.stderr and
     files opened for writing only are that much smaller. Only do_read fills it, and it
     refuses a file that is not readable first. An opened file carries it inline (buf points
     at inline_buf); io.stdin, which is in every sandbox's template and rarely read, gets it
     at its first read (fill), so the idle state does not hold 4 KiB for it. */
  char *buf;
  char inline_buf[];
} lfile;

/* Registry key of io.stdin's read-ahead buffer (a userdata), made at the first read. */
static const char key_stdin_buffer = 0;
/* Files a guest dropped without closing (stock Lua's __gc closes them; moonbox runs no
   finalizer): registry[&key_file_handles] = {[handle] = true} for every open file, and
   registry[&key_file_owners] = {[handle] = file}, weak-valued. When the view refuses an open
   for its cap on open files, a full collection (charged, as collectgarbage's) empties the
   owners of files nothing reaches, and their handles are closed before the open is tried
   again (reclaim_dropped_files). Neither table is ever a metatable (983bc433 needs a weak
   one), and the owners table is read only right after a full collection, whose result does
   not depend on when earlier cycles ran, so a replay closes the same handles. */
static const char key_file_handles = 0;
static const char key_file_owners = 0;

/* ---- errors: stock's nil, message, errno ---- */

static int push_fail(lua_State *L, const char *path, const mbxC_port_error *e) {
  luaL_pushfail(L);
  if (path)
    lua_pushfstring(L, "%s: %s", path, e->message);
  else
    lua_pushstring(L, e->message);
  lua_pushinteger(L, e->errnum);
  return 3;
}

static void not_granted(mbxC_port_error *e) {
  e->errnum = EPERM;
  snprintf(e->message, sizeof e->message, "%s",
           "Operation not permitted (this sandbox has no "
           "filesystem)");
}

/* The port when it serves files, else NULL with *e saying so. */
static const mbxC_port *fs_port(lua_State *L, mbxC_port_error *e) {
  const mbxC_port *port = mbxL_port(L);
  if (port == NULL || port->fs_open == NULL) {
    not_granted(e);
    return NULL;
  }
  mbxV_charge(L, IO_OP_COST);
  return port;
}

/* Guest time (capabilities/port.h): the run's deadline and interrupt. */
static mbxC_wait guest_wait(lua_State *L) {
  mbxC_wait w = mbxL_host_wait(L);
  w.deadline_ns = mbxV_from(L)->budget.deadline_ns;
  return w;
}

/* ---- files ---- */

static lfile *check_file(lua_State *L, int idx) {
  return (lfile *)luaL_checkudata(L, idx, FILE_TYPE);
}

static lfile *open_file(lua_State *L, int idx) {
  lfile *f = check_file(L, idx);
  if (f->closed) luaL_error(L, "attempt to use a closed file");
  return f;
}

static lfile *new_file(lua_State *L, int kind, int readable) {
  int inline_buffer = readable && kind != KIND_STDIN;
  lfile *f = (lfile *)lua_newuserdatauv(
      L, offsetof(lfile, inline_buf) + (inline_buffer ? IO_CHUNK : 0), 1);
  memset(f, 0, offsetof(lfile, inline_buf));
  f->buf = inline_buffer ? f->inline_buf : NULL;
  f->kind = kind;
  f->handle = -1;
  f->writable = kind == KIND_STDOUT || kind == KIND_STDERR || kind == KIND_POPEN_W;
  f->readable = readable;
  luaL_setmetatable(L, FILE_TYPE);
  return f;
}

/* Give back to the port what was read ahead, so a write or seek happens where the guest
   stands. */
static int sync_read(lua_State *L, lfile *f, mbxC_port_error *e) {
  const mbxC_port *port = mbxL_port(L);
  if (f->rlen > f->rpos) {
    int64_t pos;
    if (port->fs_seek(port->ud, f->handle, SEEK_CUR, -(int64_t)(f->rlen - f->rpos), &pos, e) != 0)
      return -1;
  }
  f->rpos = f->rlen = 0;
  return 0;
}

/* Refill the read buffer. 1: bytes are there; 0: end of file; -1: error in *e. */
static int fill(lua_State *L, lfile *f, mbxV_meter *m, mbxC_port_error *e) {
  if (f->rpos < f->rlen) return 1;
  if (f->kind == KIND_POPEN_R) {
    size_t got = f->plen - f->ppos < IO_CHUNK ? f->plen - f->ppos : IO_CHUNK;
    memcpy(f->buf, f->pdata + f->ppos, got);
    f->ppos += got;
    mbxV_meter_add(m, got + IO_BYTES_PER_INSN);
    f->rpos = 0;
    f->rlen = got;
    return got > 0;
  }
  const mbxC_port *port = mbxL_port(L);
  mbxC_wait w = guest_wait(L);
  size_t got = 0;
  if (f->kind == KIND_STDIN) {
    if (f->buf == NULL) {
      /* Charged to the guest like any allocation; anchored for the state's life (there is
         one io.stdin per state, so this happens once). Balanced on the stack, as a
         luaL_Buffer of the caller allows. */
      char *b = lua_newuserdatauv(L, IO_CHUNK, 0);
      lua_rawsetp(L, LUA_REGISTRYINDEX, &key_stdin_buffer);
      f->buf = b; /* only once anchored: a raise in rawsetp leaves f->buf NULL, not dangling */
    }
    /* The host's bytes or descriptor; none supplied (or no port): an empty stdin. A wait
       for the descriptor is guest time: its deadline ends the run, as an interrupt does. */
    if (port && port->stdin_read) {
      mbxV_budget_port_enter(L);
      int rc = port->stdin_read(port->ud, f->buf, IO_CHUNK, &w, &got, e);
      mbxV_budget_port_leave(L);
      if (rc != 0) {
        if (e->errnum == MBXC_E_TIMEDOUT) mbxV_trip_set(L, MBXV_TRIP_TIME);
        mbxV_check(L); /* the deadline, or an interrupt, ends the run here */
        return -1;
      }
    }
  } else {
    if (port == NULL) not_granted(e);
    if (port == NULL || port->fs_read(port->ud, f->handle, f->buf, IO_CHUNK, &w, &got, e) != 0)
      return -1;
  }
  mbxV_meter_add(m, got + IO_BYTES_PER_INSN);
  f->rpos = 0;
  f->rlen = got;
  return got > 0;
}

static int read_line(lua_State *L, lfile *f, int keep_nl, mbxV_meter *m, mbxC_port_error *e) {
  luaL_Buffer b;
  size_t total = 0;
  int r, seen_nl = 0;
  luaL_buffinit(L, &b);
  while (!seen_nl && (r = fill(L, f, m, e)) > 0) {
    const char *start = f->buf + f->rpos;
    size_t avail = f->rlen - f->rpos;
    const char *nl = memchr(start, '\n', avail);
    size_t take = nl ? (size_t)(nl - start) + 1 : avail;
    seen_nl = nl != NULL;
    luaL_addlstring(&b, start, seen_nl && !keep_nl ? take - 1 : take);
    f->rpos += take;
    total += take;
  }
  if (!seen_nl && r < 0) return -1;
  luaL_pushresult(&b);
  return total > 0 ? 1 : 0;
}

static int read_count(lua_State *L, lfile *f, size_t n, mbxV_meter *m, mbxC_port_error *e) {
  luaL_Buffer b;
  size_t total = 0;
  int r = 1;
  /* The buffer grows with what is read, never to what was asked for. */
  luaL_buffinit(L, &b);
  while (total < n && (r = fill(L, f, m, e)) > 0) {
    size_t avail = f->rlen - f->rpos, take = n - total < avail ? n - total : avail;
    luaL_addlstring(&b, f->buf + f->rpos, take);
    f->rpos += take;
    total += take;
  }
  if (r < 0 && total == 0) return -1;
  luaL_pushresult(&b);
  return total > 0 ? 1 : 0;
}

/* read("a"): what is left of the file, checked against the heap before it is read. */
static int read_all(lua_State *L, lfile *f, mbxV_meter *m, mbxC_port_error *e) {
  const mbxC_port *port = mbxL_port(L);
  int64_t here, end;
  if (f->kind == KIND_STDIN) {
    /* No size to check first: the chunks grow the buffer under the memory limit. */
    luaL_Buffer b;
    int r;
    luaL_buffinit(L, &b);
    while ((r = fill(L, f, m, e)) > 0) {
      luaL_addlstring(&b, f->buf + f->rpos, f->rlen - f->rpos);
      f->rpos = f->rlen;
    }
    if (r < 0) return -1;
    luaL_pushresult(&b);
    return 1;
  }
  if (f->kind == KIND_POPEN_R) {
    /* Already in the guest heap: the copy is what counts, and the heap limit bounds it. */
    here = (int64_t)f->ppos;
    end = (int64_t)f->plen;
  } else if (sync_read(L, f, e) != 0 ||
             port->fs_seek(port->ud, f->handle, SEEK_CUR, 0, &here, e) != 0 ||
             port->fs_seek(port->ud, f->handle, SEEK_END, 0, &end, e) != 0 ||
             port->fs_seek(port->ud, f->handle, SEEK_SET, here, &here, e) != 0)
    return -1;
  size_t left = end > here ? (size_t)(end - here) : 0;
  if (left > IO_CHUNK && !mbxL_heap_fits(L, 2 * left)) {
    mbxV_trip_set(L, MBXV_TRIP_MEMORY);
    mbxV_check(L);
  }
  luaL_Buffer b;
  int r;
  luaL_buffinit(L, &b);
  /* A file growing while it is read is read to where it ends now; the heap still bounds it. */
  while ((r = fill(L, f, m, e)) > 0) {
    luaL_addlstring(&b, f->buf + f->rpos, f->rlen - f->rpos);
    f->rpos = f->rlen;
  }
  if (r < 0) return -1;
  luaL_pushresult(&b);
  return 1;
}

/* read("n") reads stock's numeral grammar (liolib.c): an optional sign, "0x" or "0X", digits
   (hex ones after "0x"), one point and more digits, then, after at least one digit, an exponent
   ("e", or "p" after "0x") with an optional sign and decimal digits. It stops at the first byte
   that cannot continue the numeral, which stays unread ("5.E-3X" is 0.005 and leaves "X"), and
   then converts what it took with tonumber. More than 200 bytes fail, as stock. */
typedef struct {
  lua_State *L;
  lfile *f;
  mbxV_meter *m;
  mbxC_port_error *e;
  char num[201];
  size_t n;
  int r;        /* the last fill: > 0 a byte is there, 0 the end, < 0 an error */
  int too_long; /* past 200 bytes: the numeral fails */
} numeral;

/* Takes the next byte into the numeral if it is one of `set`. */
static int numeral_take(numeral *nr, const char *set) {
  if (nr->too_long || (nr->r = fill(nr->L, nr->f, nr->m, nr->e)) <= 0) return 0;
  char c = nr->f->buf[nr->f->rpos];
  /* strchr finds the terminating NUL too: a NUL byte is never part of a numeral. */
  if (c == '\0' || strchr(set, c) == NULL) return 0;
  if (nr->n >= sizeof nr->num - 1) {
    nr->too_long = 1;
    return 0;
  }
  nr->num[nr->n++] = c;
  nr->f->rpos++;
  return 1;
}

static int numeral_digits(numeral *nr, int hex) {
  int count = 0;
  while (numeral_take(nr, hex ? "0123456789abcdefABCDEF" : "0123456789"))
    count++;
  return count;
}

static int read_number(lua_State *L, lfile *f, mbxV_meter *m, mbxC_port_error *e) {
  numeral nr = {.L = L, .f = f, .m = m, .e = e, .n = 0, .r = 1, .too_long = 0};
  int r, count = 0, hex = 0;
  while ((r = fill(L, f, m, e)) > 0 && f->buf[f->rpos] != '\0' &&
         strchr(" \t\n\r\f\v", f->buf[f->rpos]) != NULL)
    f->rpos++;
  if (r < 0) return -1;
  numeral_take(&nr, "+-");
  if (numeral_take(&nr, "0")) {
    if (numeral_take(&nr, "xX"))
      hex = 1;
    else
      count = 1;
  }
  count += numeral_digits(&nr, hex);
  if (numeral_take(&nr, ".")) count += numeral_digits(&nr, hex);
  if (count > 0 && numeral_take(&nr, hex ? "pP" : "eE")) {
    numeral_take(&nr, "+-");
    numeral_digits(&nr, 0);
  }
  if (nr.r < 0 && nr.n == 0) return -1;
  nr.num[nr.n] = '\0';
  if (!nr.too_long && nr.n > 0 && lua_stringtonumber(L, nr.num) == nr.n + 1) return 1;
  lua_pushnil(L);
  return 0;
}

/* The stock g_read: formats from `first`, results until the first one that fails. */
/* io.stdin's read-ahead came from bytes the host has replaced since (mbx_sandbox_set_stdin
   promises the new bytes from their first one): drop it. */
static void drop_stale_stdin(lua_State *L, lfile *f) {
  const mbxC_port *port = mbxL_port(L);
  if (port == NULL || port->stdin_epoch == NULL) return;
  uint64_t now = port->stdin_epoch(port->ud);
  if (now == f->stdin_epoch) return;
  f->rpos = f->rlen = 0;
  f->stdin_epoch = now;
}

static int do_read(lua_State *L, lfile *f, int first) {
  mbxC_port_error e;
  if (f->kind == KIND_STDIN) drop_stale_stdin(L, f);
  if (!f->readable) {
    e.errnum = EBADF;
    snprintf(e.message, sizeof e.message, "Bad file descriptor");
    return push_fail(L, NULL, &e);
  }
  mbxV_meter m = mbxV_meter_init(L, IO_METER_BATCH, IO_BYTES_PER_INSN);
  int nargs = lua_gettop(L) - first + 1, n, ok = 1;
  if (nargs <= 0) {
    ok = read_line(L, f, 0, &m, &e);
    n = first + 1;
  } else {
    luaL_checkstack(L, nargs + LUA_MINSTACK, "too many arguments");
    for (n = first; nargs-- && ok > 0; n++) {
      if (lua_type(L, n) == LUA_TNUMBER) {
        lua_Integer l = luaL_checkinteger(L, n);
        if (l < 0) return luaL_argerror(L, n, "invalid format");
        if (l == 0) {
          /* Stock's test_eof: "" always, fail at the end of the file (the pop below). */
          int r = fill(L, f, &m, &e);
          ok = r < 0 ? -1 : r > 0;
          if (r >= 0) lua_pushliteral(L, "");
        } else {
          ok = read_count(L, f, (size_t)l, &m, &e);
        }
      } else {
        const char *p = luaL_checkstring(L, n);
        if (*p == '*') p++; /* the 5.3 spelling */
        switch (*p) {
        case 'n':
          ok = read_number(L, f, &m, &e);
          break;
        case 'l':
          ok = read_line(L, f, 0, &m, &e);
          break;
        case 'L':
          ok = read_line(L, f, 1, &m, &e);
          break;
        case 'a':
          ok = read_all(L, f, &m, &e);
          break;
        default:
          return luaL_argerror(L, n, "invalid format");
        }
      }
    }
  }
  mbxV_meter_flush(&m);
  if (ok < 0) return push_fail(L, NULL, &e);
  if (ok == 0) {
    lua_pop(L, 1);
    luaL_pushfail(L);
  }
  return n - first;
}

static int f_read(lua_State *L) {
  return do_read(L, open_file(L, 1), 2);
}

/* Write the arguments first..n: strings and numbers only, like the stock write. The file's
   userdata is at fidx (a popen "w" file collects into its user value). */
static int do_write(lua_State *L, lfile *f, int fidx, int first, int n) {
  if (f->kind == KIND_POPEN_W) {
    /* Collected for the program's stdin. */
    lua_getiuservalue(L, fidx, 1);
    int parts = lua_gettop(L);
    for (int i = first; i <= n; i++) {
      size_t len;
      luaL_checklstring(L, i, &len);
      if (len > IO_POPEN_MAX_STDIN - f->plen)
        return luaL_error(L, "io.popen: more than %d MiB written to the program",
                          (int)(IO_POPEN_MAX_STDIN >> 20));
      f->plen += len;
      mbxV_charge(L, len / IO_BYTES_PER_INSN + 1);
      lua_pushvalue(L, i);
      lua_rawseti(L, parts, (lua_Integer)lua_rawlen(L, parts) + 1);
    }
    lua_pop(L, 1);
    return 1;
  }
  if (f->kind == KIND_POPEN_R) {
    mbxC_port_error e = {EBADF, "Bad file descriptor"};
    return push_fail(L, NULL, &e);
  }
  if (f->kind == KIND_STDOUT || f->kind == KIND_STDERR) {
    for (int i = first; i <= n; i++) {
      size_t len;
      const char *s = luaL_checklstring(L, i, &len); /* numbers convert in place, as stock */
      mbxV_output_write(L, f->kind == KIND_STDOUT ? MBXV_STDOUT : MBXV_STDERR, s, len);
    }
    return 1;
  }
  mbxC_port_error e;
  const mbxC_port *port = mbxL_port(L);
  if (!f->writable) {
    e.errnum = EBADF;
    snprintf(e.message, sizeof e.message, "Bad file descriptor");
    return push_fail(L, NULL, &e);
  }
  if (port == NULL || sync_read(L, f, &e) != 0) return push_fail(L, NULL, &e);
  mbxV_meter m = mbxV_meter_init(L, IO_METER_BATCH, IO_BYTES_PER_INSN);
  for (int i = first; i <= n; i++) {
    size_t len, done = 0;
    const char *s = luaL_checklstring(L, i, &len);
    while (done < len) {
      size_t step = len - done < (64u << 10) ? len - done : (64u << 10), put = 0;
      mbxC_wait w = guest_wait(L);
      if (port->fs_write(port->ud, f->handle, s + done, step, &w, &put, &e) != 0)
        return push_fail(L, NULL, &e);
      done += put;
      mbxV_meter_add(&m, put + IO_BYTES_PER_INSN);
      if (put == 0) break;
    }
  }
  mbxV_meter_flush(&m);
  return 1;
}

static int f_write(lua_State *L) {
  lfile *f = open_file(L, 1);
  lua_pushvalue(L, 1);
  lua_insert(L, 2); /* the result: the file itself */
  int r = do_write(L, f, 1, 3, lua_gettop(L));
  if (r == 1) lua_settop(L, 2);
  return r;
}

static int f_seek(lua_State *L) {
  static const int mode[] = {SEEK_SET, SEEK_CUR, SEEK_END};
  static const char *const modenames[] = {"set", "cur", "end", NULL};
  lfile *f = open_file(L, 1);
  int op = luaL_checkoption(L, 2, "cur", modenames);
  lua_Integer offset = luaL_optinteger(L, 3, 0);
  mbxC_port_error e;
  if (f->kind != KIND_FILE) {
    e.errnum = ESPIPE;
    snprintf(e.message, sizeof e.message, "Illegal seek");
    return push_fail(L, NULL, &e);
  }
  const mbxC_port *port = mbxL_port(L);
  int64_t pos;
  mbxV_charge(L, IO_OP_COST);
  if (port == NULL || sync_read(L, f, &e) != 0 ||
      port->fs_seek(port->ud, f->handle, mode[op], (int64_t)offset, &pos, &e) != 0)
    return push_fail(L, NULL, &e);
  lua_pushinteger(L, (lua_Integer)pos);
  return 1;
}

/* A popen file: "w" runs the program now with what was written; both give os.execute's
   results. idx is the file's stack index. */
static int close_popen(lua_State *L, lfile *f, int idx) {
  f->closed = 1;
  if (f->kind == KIND_POPEN_R) return mbxL_push_exec_status(L, f->pcode, f->psignal);
  lua_getiuservalue(L, idx, 1);
  int parts = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_Integer n = (lua_Integer)lua_rawlen(L, parts);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, parts, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  size_t len;
  const char *in = lua_tolstring(L, -1, &len);
  lua_rawgeti(L, parts, 0); /* the command */
  const char *cmd = lua_tostring(L, -1);
  mbxC_exec_result res;
  mbxC_port_error e;
  if (mbxL_exec_shell(L, cmd, in, len, &res, &e) != 0) return push_fail(L, NULL, &e);
  mbxV_output_write(L, MBXV_STDOUT, res.out, res.out_len);
  mbxV_output_write(L, MBXV_STDERR, res.err, res.err_len);
  return mbxL_push_exec_status(L, res.signal ? -1 : res.exit_code, res.signal);
}

static void track_handle(lua_State *L, int handle, int idx);

static int close_file(lua_State *L, lfile *f, int idx) {
  if (f->kind == KIND_POPEN_R || f->kind == KIND_POPEN_W) return close_popen(L, f, idx);
  if (f->kind != KIND_FILE) {
    luaL_pushfail(L);
    lua_pushliteral(L, "cannot close standard file");
    return 2;
  }
  const mbxC_port *port = mbxL_port(L);
  mbxC_port_error e;
  f->closed = 1;
  track_handle(L, f->handle, 0);
  if (port && port->fs_close && port->fs_close(port->ud, f->handle, &e) != 0 &&
      e.errnum != EBADF) /* closed at the end of an earlier run: nothing to report */
    return push_fail(L, NULL, &e);
  lua_pushboolean(L, 1);
  return 1;
}

static int f_close(lua_State *L) {
  return close_file(L, open_file(L, 1), 1);
}

/* __close (a `<close>` variable): like close, and a second time does nothing. */
static int f_tbc_close(lua_State *L) {
  lfile *f = check_file(L, 1);
  if (!f->closed) close_file(L, f, 1);
  return 0;
}

/* Buffering is the port's: setvbuf accepts the stock modes and changes nothing, flush has
   nothing to push (writes reach the view when write returns). */
static int f_setvbuf(lua_State *L) {
  static const char *const modenames[] = {"no", "full", "line", NULL};
  open_file(L, 1);
  luaL_checkoption(L, 2, NULL, modenames);
  luaL_optinteger(L, 3, 0);
  lua_pushboolean(L, 1);
  return 1;
}

/* true, as Lua 5.4.4's luaL_fileresult gives (later versions return the file). */
static int f_flush(lua_State *L) {
  open_file(L, 1);
  lua_pushboolean(L, 1);
  return 1;
}

static int f_tostring(lua_State *L) {
  lfile *f = check_file(L, 1);
  lua_pushstring(L, f->closed ? "file (closed)" : "file");
  return 1;
}

/* The iterator of lines(): upvalue 1 the file, 2 the number of formats, 3.. the formats;
   upvalue (n + 3) is true when the iterator owns the file (io.lines) and closes it at the
   end. */
static int io_readline(lua_State *L) {
  lfile *f = check_file(L, lua_upvalueindex(1));
  int n = (int)lua_tointeger(L, lua_upvalueindex(2));
  if (f->closed) return luaL_error(L, "file is already closed");
  lua_settop(L, 1);
  luaL_checkstack(L, n, "too many arguments");
  for (int i = 1; i <= n; i++)
    lua_pushvalue(L, lua_upvalueindex(3 + i - 1));
  n = do_read(L, f, 2);
  if (lua_toboolean(L, -n)) return n;
  if (n > 1 && lua_type(L, -n + 1) == LUA_TSTRING) /* an error: nil, message */
    return luaL_error(L, "%s", lua_tostring(L, -n + 1));
  if (lua_toboolean(L, lua_upvalueindex(3 + (int)lua_tointeger(L, lua_upvalueindex(2))))) {
    lua_settop(L, 0);
    lua_pushvalue(L, lua_upvalueindex(1));
    close_file(L, f, 1);
  }
  return 0;
}

static void push_lines(lua_State *L, int toclose) {
  int n = lua_gettop(L) - 1; /* formats after the file at 1 */
  luaL_argcheck(L, n <= 250, 252, "too many arguments");
  /* A C function is promised only LUA_MINSTACK free slots: a guest at the stack's ceiling
     with 250 formats would otherwise have these pushes write past its end. */
  luaL_checkstack(L, n + 3, "too many arguments");
  lua_pushvalue(L, 1);
  lua_pushinteger(L, n);
  for (int i = 2; i <= n + 1; i++)
    lua_pushvalue(L, i);
  lua_pushboolean(L, toclose);
  lua_pushcclosure(L, io_readline, 3 + n);
}

static int f_lines(lua_State *L) {
  open_file(L, 1);
  push_lines(L, 0);
  return 1;
}

/* ---- io functions ---- */

/* Stock's mode check: [rwa]%+?b* */
static int mode_flags(const char *mode) {
  int flags;
  switch (*mode++) {
  case 'r':
    flags = MBXC_FS_READ;
    break;
  case 'w':
    flags = MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE;
    break;
  case 'a':
    flags = MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_APPEND;
    break;
  default:
    return -1;
  }
  if (*mode == '+') {
    flags |= MBXC_FS_READ | MBXC_FS_WRITE;
    mode++;
  }
  return strspn(mode, "b") == strlen(mode) ? flags : -1;
}

/* Record (file at idx) or forget (idx 0) the owner of an open handle (see key_file_handles). */
static void track_handle(lua_State *L, int handle, int idx) {
  idx = idx ? lua_absindex(L, idx) : 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_file_handles);
  if (idx)
    lua_pushboolean(L, 1);
  else
    lua_pushnil(L);
  lua_rawseti(L, -2, handle);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_file_owners);
  if (idx)
    lua_pushvalue(L, idx);
  else
    lua_pushnil(L);
  lua_rawseti(L, -2, handle);
  lua_pop(L, 2);
}

/* Close the handles of files no longer reachable (after a full collection). The number
   closed. */
static int reclaim_dropped_files(lua_State *L, const mbxC_port *port) {
  mbxV_charge(L, mbxL_collect_cost(L));
  lua_gc(L, LUA_GCCOLLECT);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_file_handles);
  int handles = lua_gettop(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_file_owners);
  int owners = lua_gettop(L), closed = 0;
  lua_pushnil(L);
  while (lua_next(L, handles)) { /* bounded: the view's cap on open files */
    lua_pop(L, 1);
    lua_Integer h = lua_tointeger(L, -1);
    if (lua_rawgeti(L, owners, h) == LUA_TNIL) {
      mbxC_port_error e;
      if (port->fs_close) port->fs_close(port->ud, (int)h, &e); /* EBADF: an earlier run's */
      lua_pushnil(L);
      lua_rawseti(L, handles, h); /* clearing a field during lua_next is allowed */
      closed++;
    }
    lua_pop(L, 1);
  }
  lua_settop(L, handles - 1);
  return closed;
}

/* Open path for flags into a new file at the top; 0, or -1 with *e (nothing pushed). */
static int open_path(lua_State *L, const char *path, size_t len, int flags, mbxC_port_error *e) {
  const mbxC_port *port = fs_port(L, e);
  if (port == NULL) return -1;
  lfile *f = new_file(L, KIND_FILE, (flags & MBXC_FS_READ) != 0);
  f->closed = 1; /* until the port says otherwise */
  mbxC_wait w = guest_wait(L);
  int h;
  int r = port->fs_open(port->ud, path, len, flags, &w, &h, e);
  if (r != 0 && e->errnum == EMFILE && reclaim_dropped_files(L, port) > 0)
    r = port->fs_open(port->ud, path, len, flags, &w, &h, e);
  if (r != 0) {
    lua_pop(L, 1);
    return -1;
  }
  f->handle = h;
  f->closed = 0;
  f->writable = (flags & MBXC_FS_WRITE) != 0;
  track_handle(L, h, -1);
  return 0;
}

static int io_open(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  const char *mode = luaL_optstring(L, 2, "r");
  int flags = mode_flags(mode);
  luaL_argcheck(L, flags >= 0, 2, "invalid mode");
  mbxC_port_error e;
  if (open_path(L, path, len, flags, &e) != 0) return push_fail(L, path, &e);
  return 1;
}

/* io.tmpfile(): a file opened "w+" at os.tmpname's next name in the memory /tmp and removed
   from the view at once, as POSIX tmpfile does: the handle reads and writes it, no path
   reaches it, and its bytes count against the /tmp quota until it is closed (at the latest
   when the run ends). Failures are stock's nil, message, errno. */
static int io_tmpfile(lua_State *L) {
  mbxC_port_error e;
  const mbxC_port *port = fs_port(L, &e);
  if (port == NULL) return push_fail(L, NULL, &e);
  mbxL_os_tmpname(L);
  size_t len;
  const char *name = lua_tolstring(L, -1, &len);
  int flags = MBXC_FS_READ | MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE;
  if (open_path(L, name, len, flags, &e) != 0) return push_fail(L, NULL, &e);
  mbxC_wait w = guest_wait(L);
  if (port->fs_remove(port->ud, name, len, &w, &e) != 0) {
    mbxC_port_error ignored;
    lfile *f = lua_touserdata(L, -1);
    track_handle(L, f->handle, 0);
    port->fs_close(port->ud, f->handle, &ignored);
    f->closed = 1;
    return push_fail(L, NULL, &e);
  }
  return 1;
}

/* io.popen(cmd [, "r" | "w"]): /bin/sh -c cmd in the exec backend (stdlib/proc.c). "r" runs
   the program to completion now and returns a file that reads its stdout (its stderr goes to
   the run's); "w" returns a file whose writes become the program's stdin when it is closed
   (its output goes to the run's). close gives os.execute's results. A "w" file never closed
   runs nothing. */
static int io_popen(lua_State *L) {
  const char *cmd = luaL_checkstring(L, 1);
  const char *mode = luaL_optstring(L, 2, "r");
  int w = strcmp(mode, "w") == 0;
  luaL_argcheck(L, w || strcmp(mode, "r") == 0, 2, "invalid mode");
  const mbxC_port *port = mbxL_port(L);
  if (port == NULL || port->exec_run == NULL)
    return luaL_error(L, "io.popen is not available: this policy grants no exec");
  if (w) {
    lfile *f = new_file(L, KIND_POPEN_W, 0);
    lua_createtable(L, 4, 0);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 0);
    lua_setiuservalue(L, -2, 1);
    f->writable = 1;
    return 1;
  }
  mbxC_exec_result res;
  mbxC_port_error e;
  if (mbxL_exec_shell(L, cmd, NULL, 0, &res, &e) != 0) return push_fail(L, cmd, &e);
  mbxV_output_write(L, MBXV_STDERR, res.err, res.err_len);
  lfile *f = new_file(L, KIND_POPEN_R, 1);
  lua_pushlstring(L, res.out, res.out_len);
  f->pdata = lua_tolstring(L, -1, &f->plen);
  lua_setiuservalue(L, -2, 1);
  f->pcode = res.signal ? -1 : res.exit_code;
  f->psignal = res.signal;
  return 1;
}

/* io.lines(path, ...): raises when the file cannot be opened (stock); the four results let a
   generic for close the file when the loop is left early. */
static int io_lines(lua_State *L) {
  if (lua_isnone(L, 1)) lua_pushnil(L);
  if (lua_isnil(L, 1)) {
    /* The lines of io.input(), which stays open (stock). */
    lua_rawgeti(L, IO_CURRENT, IO_INPUT);
    lua_replace(L, 1);
    open_file(L, 1);
    push_lines(L, 0);
    return 1;
  }
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  mbxC_port_error e;
  if (open_path(L, path, len, MBXC_FS_READ, &e) != 0)
    return luaL_error(L, "%s: %s", path, e.message);
  lua_replace(L, 1);
  push_lines(L, 1);
  lua_pushnil(L);
  lua_pushnil(L);
  lua_pushvalue(L, 1);
  return 4;
}

static int io_type(lua_State *L) {
  luaL_checkany(L, 1);
  lfile *f = (lfile *)luaL_testudata(L, 1, FILE_TYPE);
  if (f == NULL)
    luaL_pushfail(L);
  else if (f->closed)
    lua_pushliteral(L, "closed file");
  else
    lua_pushliteral(L, "file");
  return 1;
}

static int io_close(lua_State *L) {
  if (lua_isnone(L, 1)) lua_rawgeti(L, IO_CURRENT, IO_OUTPUT);
  return f_close(L);
}

/* io.input / io.output: the current file; with a name, that file opened (raising when it
   cannot be, as stock), with a file, that file, as the new current one. */
static int io_current(lua_State *L, int key, int flags) {
  if (!lua_isnoneornil(L, 1)) {
    size_t len;
    const char *path = lua_tolstring(L, 1, &len);
    if (path) {
      mbxC_port_error e;
      if (open_path(L, path, len, flags, &e) != 0)
        return luaL_error(L, "cannot open file '%s' (%s)", path, e.message);
    } else {
      open_file(L, 1);
      lua_pushvalue(L, 1);
    }
    lua_rawseti(L, IO_CURRENT, key);
  }
  lua_rawgeti(L, IO_CURRENT, key);
  return 1;
}

static int io_input(lua_State *L) {
  return io_current(L, IO_INPUT, MBXC_FS_READ);
}

static int io_output(lua_State *L) {
  return io_current(L, IO_OUTPUT, MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE);
}

/* The current file of key, checked open (stock: "default input file is closed"). */
static lfile *current(lua_State *L, int key, const char *what) {
  lua_rawgeti(L, IO_CURRENT, key);
  lfile *f = check_file(L, -1);
  if (f->closed) luaL_error(L, "default %s file is closed", what);
  return f;
}

/* io.read(...): io.input():read(...). */
static int io_read(lua_State *L) {
  lfile *in = current(L, IO_INPUT, "input");
  lua_pop(L, 1);
  return do_read(L, in, 1);
}

/* io.write(...): io.output():write(...), which returns the file. */
static int io_write(lua_State *L) {
  int n = lua_gettop(L);
  lfile *out = current(L, IO_OUTPUT, "output"); /* at n + 1, after the arguments */
  int r = do_write(L, out, n + 1, 1, n);
  if (r == 1) lua_rawgeti(L, IO_CURRENT, IO_OUTPUT);
  return r;
}

/* io.flush(): io.output():flush(). */
static int io_flush(lua_State *L) {
  current(L, IO_OUTPUT, "output");
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- os.remove, os.rename, os.tmpname (stdlib/os.c installs them) ---- */

int mbxL_os_remove(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  mbxC_port_error e;
  const mbxC_port *port = fs_port(L, &e);
  mbxC_wait w = guest_wait(L);
  if (port == NULL || port->fs_remove(port->ud, path, len, &w, &e) != 0)
    return push_fail(L, path, &e);
  lua_pushboolean(L, 1);
  return 1;
}

int mbxL_os_rename(lua_State *L) {
  size_t from_len, to_len;
  const char *from = luaL_checklstring(L, 1, &from_len);
  const char *to = luaL_checklstring(L, 2, &to_len);
  mbxC_port_error e;
  const mbxC_port *port = fs_port(L, &e);
  mbxC_wait w = guest_wait(L);
  if (port == NULL || port->fs_rename(port->ud, from, from_len, to, to_len, &w, &e) != 0)
    return push_fail(L, from, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* os.tmpname(): a new empty file in the memory /tmp, made exclusively (as mkstemp does), its
   name from a per-sandbox counter (the registry's), so runs are reproducible. */
int mbxL_os_tmpname(lua_State *L) {
  mbxC_port_error e;
  const mbxC_port *port = fs_port(L, &e);
  if (port == NULL) return luaL_error(L, "unable to generate a unique filename");
  lua_Integer n =
      (lua_getfield(L, LUA_REGISTRYINDEX, "mbx.tmpname") == LUA_TNUMBER) ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  for (int tries = 0; tries < 100; tries++) {
    char name[40];
    int len = snprintf(name, sizeof name, "/tmp/lua_%06lld", (long long)++n);
    int h;
    mbxC_wait w = guest_wait(L);
    int r = port->fs_open(port->ud, name, (size_t)len,
                          MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_EXCLUSIVE, &w, &h, &e);
    if (r == 0) port->fs_close(port->ud, h, &e);
    if (r == 0 || e.errnum != EEXIST) {
      lua_pushinteger(L, n);
      lua_setfield(L, LUA_REGISTRYINDEX, "mbx.tmpname");
      if (r != 0) return luaL_error(L, "unable to generate a unique filename: %s", e.message);
      lua_pushlstring(L, name, (size_t)len);
      return 1;
    }
  }
  return luaL_error(L, "unable to generate a unique filename");
}

/* ---- fs: what Lua's io and os lack ---- */

static const char *type_name(const mbxC_fs_stat *st) {
  return st->is_dir ? "directory" : st->is_file ? "file" : "other";
}

static int fs_stat(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  mbxC_port_error e;
  mbxC_fs_stat st;
  const mbxC_port *port = fs_port(L, &e);
  mbxC_wait w = guest_wait(L);
  if (port == NULL || port->fs_stat(port->ud, path, len, &w, &st, &e) != 0)
    return push_fail(L, path, &e);
  lua_createtable(L, 0, 4);
  lua_pushstring(L, type_name(&st));
  lua_setfield(L, -2, "type");
  lua_pushinteger(L, (lua_Integer)st.size);
  lua_setfield(L, -2, "size");
  lua_pushinteger(L, (lua_Integer)st.mtime);
  lua_setfield(L, -2, "mtime");
  lua_pushboolean(L, st.writable);
  lua_setfield(L, -2, "writable");
  return 1;
}

static int fs_exists(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  mbxC_port_error e;
  mbxC_fs_stat st;
  const mbxC_port *port = fs_port(L, &e);
  mbxC_wait w = guest_wait(L);
  lua_pushboolean(L, port != NULL && port->fs_stat(port->ud, path, len, &w, &st, &e) == 0);
  return 1;
}

static int fs_mkdir(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  mbxC_port_error e;
  const mbxC_port *port = fs_port(L, &e);
  mbxC_wait w = guest_wait(L);
  if (port == NULL || port->fs_mkdir(port->ud, path, len, &w, &e) != 0)
    return push_fail(L, path, &e);
  lua_pushboolean(L, 1);
  return 1;
}

/* fs.list(dir): an array of {name = ..., type = "file" | "directory" | "other"}, sorted by
   name (the host's directory order would differ between hosts). */
static int fs_list(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  mbxC_port_error e;
  const mbxC_port *port = fs_port(L, &e);
  const char *names;
  size_t names_len;
  mbxC_wait w = guest_wait(L);
  if (port == NULL || port->fs_list(port->ud, path, len, &w, &names, &names_len, &e) != 0)
    return push_fail(L, path, &e);
  /* The names are valid until the next port call: copy them into one Lua string first. */
  lua_pushlstring(L, names, names_len);
  mbxV_charge(L, names_len / IO_BYTES_PER_INSN + 1);
  size_t all_len;
  const char *all = lua_tolstring(L, -1, &all_len);
  lua_newtable(L);
  lua_Integer i = 0;
  for (size_t at = 0; at < all_len; at += strlen(all + at) + 1) {
    const char *name = all + at;
    lua_createtable(L, 0, 2);
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, path, len);
    if (len == 0 || path[len - 1] != '/') luaL_addchar(&b, '/');
    luaL_addstring(&b, name);
    luaL_pushresult(&b);
    size_t child_len;
    const char *child = lua_tolstring(L, -1, &child_len);
    mbxC_fs_stat st;
    mbxV_charge(L, IO_OP_COST);
    const char *type =
        port->fs_stat(port->ud, child, child_len, &w, &st, &e) == 0 ? type_name(&st) : "other";
    lua_pop(L, 1);
    lua_pushstring(L, type);
    lua_setfield(L, -2, "type");
    lua_rawseti(L, -2, ++i);
  }
  /* Sorted with table.sort's own comparison would run guest-visible code; names are
     compared bytewise here, in a metered insertion into place. */
  for (lua_Integer a = 2; a <= i; a++) {
    for (lua_Integer b2 = a; b2 > 1; b2--) {
      lua_rawgeti(L, -1, b2 - 1);
      lua_getfield(L, -1, "name");
      lua_rawgeti(L, -3, b2);
      lua_getfield(L, -1, "name");
      int swap = strcmp(lua_tostring(L, -3), lua_tostring(L, -1)) > 0;
      mbxV_charge(L, 1);
      if (!swap) {
        lua_pop(L, 4);
        break;
      }
      lua_pop(L, 1); /* ... t prev prevname cur */
      lua_rawseti(L, -4, b2 - 1);
      lua_pop(L, 1); /* ... t prev */
      lua_rawseti(L, -2, b2);
    }
  }
  return 1;
}

static int fs_remove(lua_State *L) {
  return mbxL_os_remove(L);
}

static void open_fs(lua_State *L) {
  static const luaL_Reg funcs[] = {{"list", fs_list},     {"stat", fs_stat},
                                   {"mkdir", fs_mkdir},   {"exists", fs_exists},
                                   {"remove", fs_remove}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setglobal(L, "fs");
}

int mbxL_open_io(lua_State *L) {
  static const luaL_Reg methods[] = {{"read", f_read},   {"write", f_write}, {"lines", f_lines},
                                     {"seek", f_seek},   {"close", f_close}, {"setvbuf", f_setvbuf},
                                     {"flush", f_flush}, {NULL, NULL}};
  lua_newtable(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_file_handles);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_file_owners);
  luaL_newmetatable(L, FILE_TYPE);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, f_tbc_close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, f_tostring);
  lua_setfield(L, -2, "__tostring");
  /* The metatable stays out of the guest's reach: a __gc added to it would mark every file
     opened later for finalization (guest code at a moment the collector picks). */
  lua_pushliteral(L, "FILE*");
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 1);

  lua_createtable(L, 0, 12);
  lua_pushcfunction(L, io_open);
  lua_setfield(L, -2, "open");
  lua_pushcfunction(L, io_type);
  lua_setfield(L, -2, "type");
  lua_pushcfunction(L, io_popen);
  lua_setfield(L, -2, "popen");
  lua_pushcfunction(L, io_tmpfile);
  lua_setfield(L, -2, "tmpfile");
  lua_createtable(L, 2, 0); /* io.input(), io.output() */
  new_file(L, KIND_STDIN, 1);
  lua_pushvalue(L, -1);
  lua_rawseti(L, -3, IO_INPUT);
  lua_setfield(L, -3, "stdin");
  new_file(L, KIND_STDOUT, 0);
  lua_pushvalue(L, -1);
  lua_rawseti(L, -3, IO_OUTPUT);
  lua_setfield(L, -3, "stdout");
  new_file(L, KIND_STDERR, 0);
  lua_setfield(L, -3, "stderr");
  static const luaL_Reg funcs[] = {{"write", io_write},   {"read", io_read},   {"input", io_input},
                                   {"output", io_output}, {"close", io_close}, {"lines", io_lines},
                                   {"flush", io_flush},   {NULL, NULL}};
  luaL_setfuncs(L, funcs, 1); /* each closes over the table */
  lua_setglobal(L, "io");
  open_fs(L);
  return 0;
}
