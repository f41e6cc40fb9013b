/* vm/status.h -- how a run of the vm ended, in the vm's own terms (host/ maps it to the public
   mbx_status), and why a run was refused before anything ran. */
#ifndef MBX_VM_STATUS_H
#define MBX_VM_STATUS_H

typedef enum mbxV_status {
  /* The run happened (an outcome is filled). */
  MBXV_OK = 0,
  MBXV_SYNTAX_ERROR = 1,
  MBXV_RUNTIME_ERROR = 2,
  MBXV_MEMORY_LIMIT = 3,
  MBXV_INSTRUCTION_LIMIT = 4,
  MBXV_TIME_LIMIT = 5,
  MBXV_OUTPUT_LIMIT = 6,
  MBXV_HOST_CALL_LIMIT = 7,
  MBXV_INTERRUPTED = 8,
  MBXV_PAUSED = 9,
  MBXV_INTERNAL_ERROR = 10,
  /* Refused: nothing ran, nothing was bound (mbxV_refusal says why). */
  MBXV_INVALID_INPUT = 101,
  MBXV_SOURCE_TOO_LARGE = 102,
  MBXV_NO_MEMORY = 107
} mbxV_status;

/* At or above: a refusal. (The numbers follow the public enum's, so the host's mapping is
   checked to be exact by tests/host/test_result.c; nothing relies on it otherwise.) */
#define MBXV_REFUSED_BASE 100

/* Why a run or resume was refused: a one-line message naming what was wrong. Fixed size, so
   it is filled without allocating. */
typedef struct mbxV_refusal {
  mbxV_status code;
  char message[256];
} mbxV_refusal;

/* Fill r (may be NULL): code and a printf-style message. */
void mbxV_refuse(mbxV_refusal *r, mbxV_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
