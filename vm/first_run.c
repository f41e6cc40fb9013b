/* vm/first_run.c -- a recorded first-run preparation per slot, replayed in its next fresh
   sandboxes (why it is sound: vm/first_run.h). */
#include "vm/first_run.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "vm/arena.h"

/* What the state looked like before a preparation: the match a replay needs. */
typedef struct before_key {
  size_t used, limit, ceiling, prefix;
  lua_Hook hook;
  int hook_mask, hook_count;
} before_key;

struct mbxV_first_run {
  uint64_t seen;   /* hash of the last first run's text here, recorded or not */
  uint64_t hash;   /* the recorded text's hash */
  unsigned misses; /* first runs here since the recording was last replayed or made */
  /* The text whose last preparation could not be recorded (too many changes, a field of the
     sandbox's moved): not copied and compared again until MBXV_FIRST_RUN_PATIENCE first runs
     went by, or every fresh sandbox of that text would pay two state copies for nothing. */
  uint64_t refused;
  before_key pending; /* taken by mbxV_first_run_begin for mbxV_first_run_end */
  /* The recording (source NULL: none): the restore it was taken over, by address and
     generation (vm/vm.h, fresh_source). */
  const char *source;
  uint64_t gen;
  before_key key;
  char *text, *name; /* one block: the text, then the chunk name and its NUL */
  size_t text_len, name_len;
  uint32_t (*runs)[2]; /* {offset, length} of each changed stretch, ascending */
  size_t nruns;
  char *bytes;   /* the stretches' new bytes, concatenated */
  size_t extent; /* the end of the last stretch */
};

static before_key key_of(const mbxV_vm *vm) {
  before_key k = {.used = vm->heap.used,
                  .limit = vm->heap.limit,
                  .ceiling = vm->heap.ceiling,
                  .prefix = mbxV_arena_prefix(vm->slot->arena),
                  .hook = lua_gethook(vm->L),
                  .hook_mask = lua_gethookmask(vm->L),
                  .hook_count = lua_gethookcount(vm->L)};
  return k;
}

static int same_key(const before_key *a, const before_key *b) {
  return a->used == b->used && a->limit == b->limit && a->ceiling == b->ceiling &&
         a->prefix == b->prefix && a->hook == b->hook && a->hook_mask == b->hook_mask &&
         a->hook_count == b->hook_count;
}

static void drop_recording(mbxV_first_run *r) {
  free(r->text);
  free(r->runs);
  free(r->bytes);
  r->text = r->name = r->bytes = NULL;
  r->runs = NULL;
  r->source = NULL;
  r->gen = 0;
  r->nruns = r->extent = r->text_len = r->name_len = 0;
}

void mbxV_first_run_free(mbxV_first_run *r) {
  if (r == NULL) return;
  drop_recording(r);
  free(r);
}

int mbxV_first_run_replay(mbxV_vm *vm, const char *source, uint64_t gen, const char *code,
                          size_t code_len, const char *chunk_name) {
#ifdef MBX_ARENA_MALLOC
  /* The heap is malloc blocks, not the slot's bytes: nothing to record or replay. */
  (void)vm, (void)source, (void)gen, (void)code, (void)code_len, (void)chunk_name;
  return 0;
#endif
  mbxV_first_run *r = vm->slot ? vm->slot->first_run : NULL;
  if (r == NULL || r->source == NULL || r->source != source || r->gen != gen ||
      r->text_len != code_len || memcmp(r->text, code, code_len) != 0)
    return 0;
  size_t name_len = strlen(chunk_name);
  before_key now = key_of(vm);
  if (r->name_len != name_len || memcmp(r->name, chunk_name, name_len) != 0 ||
      !same_key(&r->key, &now))
    return 0;
  mbxV_slot_patch(vm->slot, (const uint32_t(*)[2])r->runs, r->nruns, r->bytes, r->extent);
  r->seen = r->hash;
  r->misses = 0;
  return 1;
}

char *mbxV_first_run_begin(mbxV_vm *vm, const char *code, size_t code_len, const char *chunk_name,
                           size_t *len) {
  mbxV_slot *s = vm->slot;
  *len = 0;
#ifdef MBX_ARENA_MALLOC
  (void)code, (void)chunk_name, (void)s;
  return NULL;
#endif
  if (s == NULL || code_len > MBXV_FIRST_RUN_TEXT_MAX) return NULL;
  if (s->first_run == NULL && (s->first_run = calloc(1, sizeof *s->first_run)) == NULL) return NULL;
  mbxV_first_run *r = s->first_run;
  uint64_t seen = XXH3_64bits_withSeed(code, code_len, XXH3_64bits(chunk_name, strlen(chunk_name)));
  int again = r->seen == seen;
  r->seen = seen;
  if (r->misses < UINT32_MAX) r->misses++;
  /* A hash only decides when to record (replays match bytes). A recording in use is replaced
     only once it went unused for a while: texts that alternate in pairs would otherwise pay a
     recording (two copies of the state) every other sandbox. */
  if (!again || ((r->source != NULL || r->refused == seen) && r->misses < MBXV_FIRST_RUN_PATIENCE))
    return NULL;
  r->pending = key_of(vm);
  /* Room for what the preparation adds past the prefix; a larger growth is not recorded. */
  size_t room = r->pending.prefix + MBXV_FIRST_RUN_BYTES_MAX;
  if (room > s->size) room = s->size;
  char *before = malloc(room);
  if (before == NULL) return NULL;
  mbxV_arena_copy_out(s->arena, before, room);
  *len = room;
  return before;
}

/* A word of the vm struct a preparation may change: the heap's figures and run.c's fields
   (everything else there is the sandbox's, or never written by a run). */
static int vm_word_may_change(size_t at) {
  size_t heap_at = offsetof(mbxV_vm, heap), runs_at = offsetof(mbxV_vm, run_thread);
  size_t runs_end = offsetof(mbxV_vm, pending_set) + sizeof(int);
  size_t hash_at = offsetof(mbxV_vm, last_text_hash);
  return (at >= heap_at && at < heap_at + sizeof(mbxV_heap)) || (at >= runs_at && at < runs_end) ||
         (at >= hash_at && at < hash_at + sizeof(uint64_t));
}

void mbxV_first_run_end(mbxV_vm *vm, const char *source, uint64_t gen, char *before, size_t len,
                        const char *code, size_t code_len, const char *chunk_name) {
  mbxV_slot *s = vm->slot;
  mbxV_first_run *r = s->first_run;
  size_t prefix = mbxV_arena_prefix(s->arena);
  char *after = prefix <= len && prefix % sizeof(uint64_t) == 0 ? malloc(prefix) : NULL;
  uint32_t(*runs)[2] = NULL;
  char *bytes = NULL, *text = NULL;
  int kept = 0;
  if (after == NULL) goto out;
  mbxV_arena_copy_out(s->arena, after, prefix);
  size_t hole_len, hole_at = mbxV_vm_hole(vm, &hole_len);
  size_t vm_at = (size_t)((char *)vm - (char *)s->arena);
  size_t high_at = offsetof(mbxV_arena, high);
  /* Stretches of changed words, merged across gaps of up to two words. */
  size_t cap = 64, n = 0, total = 0;
  if ((runs = malloc(cap * sizeof *runs)) == NULL) goto out;
  /* Word reads of the two copies, as find_pointers (vm/arena.c) reads a template. */
  const uint64_t *was = (const uint64_t *)(const void *)before;
  const uint64_t *is = (const uint64_t *)(const void *)after;
  size_t old_words = r->pending.prefix / sizeof(uint64_t);
  for (size_t i = 0; i < prefix / sizeof(uint64_t); i++) {
    int past_old = i >= old_words;
    if (!past_old && was[i] == is[i]) continue; /* most words: one comparison */
    size_t at = i * sizeof(uint64_t);
    if (at >= hole_at && at < hole_at + hole_len) continue;
    if (at == high_at) continue;
    if (!past_old && at >= vm_at && at < vm_at + sizeof(mbxV_vm) && !vm_word_may_change(at - vm_at))
      goto out; /* a field of the sandbox's changed: not a replayable preparation */
    total += sizeof(uint64_t);
    if (total > MBXV_FIRST_RUN_BYTES_MAX) goto out;
    if (n > 0 && at - (runs[n - 1][0] + runs[n - 1][1]) <= 2 * sizeof(uint64_t)) {
      total += at - (runs[n - 1][0] + runs[n - 1][1]);
      runs[n - 1][1] = (uint32_t)(at + sizeof(uint64_t) - runs[n - 1][0]);
      continue;
    }
    if (n == cap) {
      uint32_t(*grown)[2] = realloc(runs, 2 * cap * sizeof *runs);
      if (grown == NULL) goto out;
      runs = grown;
      cap *= 2;
    }
    runs[n][0] = (uint32_t)at;
    runs[n][1] = sizeof(uint64_t);
    n++;
  }
  if (n == 0 || (bytes = malloc(total)) == NULL) goto out;
  size_t name_len = strlen(chunk_name);
  if ((text = malloc(code_len + name_len + 1)) == NULL) goto out;
  for (size_t i = 0, put = 0; i < n; i++) {
    memcpy(bytes + put, after + runs[i][0], runs[i][1]);
    put += runs[i][1];
  }
  memcpy(text, code, code_len);
  memcpy(text + code_len, chunk_name, name_len + 1);
  drop_recording(r);
  r->source = source;
  r->gen = gen;
  r->hash = r->seen;
  r->misses = 0;
  r->refused = 0;
  r->key = r->pending;
  r->text = text;
  r->text_len = code_len;
  r->name = text + code_len;
  r->name_len = name_len;
  r->runs = runs;
  r->nruns = n;
  r->bytes = bytes;
  r->extent = runs[n - 1][0] + runs[n - 1][1];
  runs = NULL;
  bytes = text = NULL;
  kept = 1;
out:
  if (!kept) {
    r->refused = r->seen;
    r->misses = 0;
  }
  free(runs);
  free(bytes);
  free(text);
  free(after);
  free(before);
}
