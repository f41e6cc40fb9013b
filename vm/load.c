/* vm/load.c -- text-only loading with the parser under the budget. */
#include "vm/load.h"

#include "vm/budget.h"

typedef struct pieces {
  const char *next;
  size_t left;
  int started;
} pieces;

static const char *read_piece(lua_State *L, void *ud, size_t *size) {
  pieces *p = ud;
  /* Polled before every piece but the first: by then the parser has done the work the
     previous piece asked for. Ending the input early is how a reader stops lua_load. */
  if (p->started && mbxV_poll(L, MBXV_LOAD_PIECE / 16) != MBXV_TRIP_NONE) p->left = 0;
  p->started = 1;
  size_t n = p->left < MBXV_LOAD_PIECE ? p->left : MBXV_LOAD_PIECE;
  *size = n;
  const char *piece = p->next;
  p->next += n;
  p->left -= n;
  return n ? piece : NULL;
}

int mbxV_load_text(lua_State *L, const char *text, size_t len, const char *chunk_name) {
  pieces p = {text, len, 0};
  int status = lua_load(L, read_piece, &p, chunk_name, "t");
  if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
    lua_pop(L, 1);
    lua_pushliteral(L, "the parse was stopped by a limit");
    return LUA_ERRRUN;
  }
  return status;
}
