/* vm/coverage.c -- guest line coverage for the fuzz engine (vm/coverage.h). */
#include "vm/coverage.h"

mbxV_coverage *mbxV_coverage_active = NULL;
mbxV_compare_hint_fn mbxV_compare_hint = NULL;

void mbxV_coverage_set(mbxV_coverage *cov) {
  mbxV_coverage_active = cov;
}

void mbxV_coverage_restart(void) {
  if (mbxV_coverage_active) mbxV_coverage_active->prev = 0;
}

/* A 32-bit finaliser: neighbouring lines of one chunk land far apart in the map. */
static uint32_t mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352dU;
  h ^= h >> 15;
  h *= 0x846ca68bU;
  h ^= h >> 16;
  return h;
}

void mbxV_coverage_line(lua_State *L, lua_Debug *ar) {
  mbxV_coverage *c = mbxV_coverage_active;
  /* "S" fills short_src (at most LUA_IDSIZE bytes, the chunk name as tracebacks show it): the
     same text in every process, unlike any address. */
  if (c == NULL || !lua_getinfo(L, "S", ar)) return;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const char *p = ar->short_src; *p != '\0'; p++)
    h = (h ^ (uint8_t)*p) * 16777619u;
  uint32_t loc = mix(h ^ ((uint32_t)ar->currentline * 0x9e3779b1u));
  uint8_t *counter = &c->counters[(loc ^ c->prev) & c->mask];
  if (*counter != 255) (*counter)++; /* saturate: a wrap to 0 would hide the edge */
  c->prev = loc >> 1;
}
