/* vm/hibernate.h -- an idle sandbox's heap out of memory and back: same slot, same address. */
#ifndef MBX_VM_HIBERNATE_H
#define MBX_VM_HIBERNATE_H

/*
** A hibernated vm's slot keeps its address range and loses its pages (vm/arena.h,
** mbxV_slot_release_pages); its used prefix (arena header, the vm struct, every block) lives
** in host memory as an image: the prefix XORed word by word against the slot's pristine
** template, then LZ4-compressed. One collection flips the mark bits of every object header,
** so nearly every page differs from the template, but most words do not: the XOR leaves long
** runs of zeros, which LZ4 stores in a few bytes and expands at memset speed. Waking maps the
** range again, decompresses into the same address and XORs the template back in: the state is
** byte for byte the one that went to sleep, at the address it was built at (nothing is
** relocated: guest integers, doubles and string.pack bytes can look like pointers).
**
** An image is process-local: it names a slot and a template of this process. It is never
** written anywhere but this process's heap.
*/

#include <stddef.h>

#include "vm/vm.h"

typedef struct mbxV_image {
  struct mbxV_slot *slot; /* where the state sleeps (read from the vm before its pages go) */
  char *bytes;            /* the compressed delta; NULL while the vm is awake */
  size_t packed;          /* bytes of it */
  size_t len;             /* the prefix it restores */
} mbxV_image;

typedef enum mbxV_hibernate_result {
  MBXV_HIBERNATE_OK = 0,
  MBXV_HIBERNATE_NO_MEMORY,  /* no host memory for the image: the vm is untouched */
  MBXV_HIBERNATE_UNSUPPORTED /* MBX_ARENA_MALLOC builds (the state is not one byte range) */
} mbxV_hibernate_result;

/* Put vm to sleep into img (zero-initialised or woken). No run may be active (a paused one is
   fine: it holds no C stack). First, what is host memory and belongs to no run goes: the
   output buffers (per call: emptied by the next run or resume anyway) are freed. Afterwards
   nothing in the slot may be read (vm->... faults) until mbxV_vm_wake; keep what is needed
   meanwhile outside it. The recorded first run (vm/first_run.h) is forgotten: a woken state is
   no fresh one. */
mbxV_hibernate_result mbxV_vm_hibernate(mbxV_vm *vm, mbxV_image *img);
typedef enum mbxV_wake_result {
  MBXV_WAKE_OK = 0,
  MBXV_WAKE_NO_MEMORY, /* the kernel gave no pages back: still asleep, img intact (retry) */
  MBXV_WAKE_CORRUPT    /* the image did not decode (never, short of memory corruption): the
                          slot holds no valid state; only mbxV_vm_free_hibernated may follow */
} mbxV_wake_result;

/* Bring the state back into its slot, byte for byte; img is emptied on success. */
mbxV_wake_result mbxV_vm_wake(mbxV_image *img);
/* Give a sleeping vm's slot back to its pool without waking it, and free img. */
void mbxV_vm_free_hibernated(mbxV_image *img);

#endif
