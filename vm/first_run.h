/* vm/first_run.h -- a fresh sandbox's first run of a text its slot saw before: what preparing
   that text (loading its cached bytecode, making the run thread) wrote into the pristine
   state, recorded once per slot and written again instead of doing the work again. */
#ifndef MBX_VM_FIRST_RUN_H
#define MBX_VM_FIRST_RUN_H

/*
** Why a replay is the load itself. A slot's fresh state is a byte copy of one of its class's
** shared templates, plain or shaped (vm->fresh_source names the copy, vm->fresh_gen the
** shape's generation: a shaped template is freed when another shape replaces it, and a later
** one may get its address), configured for the sandbox. Preparing a run on
** it is deterministic: the allocator, the string table, the collector's debt and every object
** the load touches are template bytes; what differs between two fresh sandboxes of the slot
** is what the sandbox owns (the budget and output hole, its limits, address key, port and
** hook settings, the random generator's state) and the previous tenant's bytes past the
** prefix. So a recording is taken only where none of that could matter, and matched only
** where it is the same:
** - keyed by the restore's source and generation, the text and chunk name byte for byte, the
**   heap's use and
**   limits and the main thread's hook (what lua_newthread copies into the run thread);
** - only for a load that hit the bytecode cache (a parse leaves other bytes), with no inputs
**   (they are bound before the load) and no trip;
** - the difference is taken word by word against a copy of the state made just before, minus
**   the hole and the arena's high-water mark (per tenant); every word past the old prefix is
**   taken whatever its value (the previous tenant's bytes there are not the template's);
** - a difference anywhere in the vm struct outside the heap's figures and run.c's own fields
**   means something per sandbox moved: nothing is recorded.
** What is left out is what the guest can observe anyway only as a cache hit: the state after a
** replay is the state after the load, byte for byte, except words no load wrote.
*/

#include <stddef.h>
#include <stdint.h>

#include "vm/vm.h"

typedef struct mbxV_first_run mbxV_first_run;

/* Texts longer than this are never recorded (a recording keeps a copy of its text). */
#define MBXV_FIRST_RUN_TEXT_MAX 1024
/* A slot's recording is replaced by another text's only after this many first runs in a
   row that did not replay it (each recording costs about two copies of the state). */
#define MBXV_FIRST_RUN_PATIENCE 64
/* A preparation that changed more than this many bytes is not recorded. */
#define MBXV_FIRST_RUN_BYTES_MAX 16384

/* Write the slot's recording into vm's state when it was recorded for exactly this first run
   (the restore's source and gen, as vm->fresh_source and vm->fresh_gen were, the same text
   and chunk name, heap use, limits and hook).
   Returns 1 when written: vm->run_thread then holds the chunk's function, as the preparation
   leaves it. The caller has checked that no trip is set and that there are no inputs. */
int mbxV_first_run_replay(mbxV_vm *vm, const char *source, uint64_t gen, const char *code,
                          size_t code_len, const char *chunk_name);

/* Before a first run's preparation that no recording matched: when the slot saw this text's
   first run last time too, a copy of the state (host memory, *len bytes, freed by
   mbxV_first_run_end) for mbxV_first_run_end; NULL otherwise (the common distinct text pays
   one hash). */
char *mbxV_first_run_begin(mbxV_vm *vm, const char *code, size_t code_len, const char *chunk_name,
                           size_t *len);

/* After that preparation succeeded (a bytecode cache hit, no trip): record what it wrote
   into the slot, replacing an older recording. Frees before. */
void mbxV_first_run_end(mbxV_vm *vm, const char *source, uint64_t gen, char *before, size_t len,
                        const char *code, size_t code_len, const char *chunk_name);

void mbxV_first_run_free(mbxV_first_run *r);

#endif
