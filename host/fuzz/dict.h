/* host/fuzz/dict.h -- the fuzz engine's automatic dictionary: a target's constants. */
#ifndef MBX_HOST_FUZZ_DICT_H
#define MBX_HOST_FUZZ_DICT_H

#include <stddef.h>
#include <stdio.h>

#include "include/moonbox.h"

/* Longest entry libFuzzer keeps from a dictionary (its Word size). */
#define MBXH_FUZZ_DICT_WORD_MAX 64
/* Entries written at most: a generated target cannot make the file huge. */
#define MBXH_FUZZ_DICT_MAX 8192

/*
** Compiles code as mbx_check does (host/check.h: nothing runs) and writes to f, in libFuzzer's
** dictionary format, one entry per distinct constant of every function of the chunk: strings
** of 1..64 bytes as they are, integers (the constant table's and the immediates of EQI, LTI,
** LEI, GTI, GEI and LOADI) as decimal text and, for 0..255, also as that byte; floats as the
** shortest text that reads back the same. Returns the count of entries, or -1 with err filled
** (a syntax error, a limit, no memory).
*/
int mbxH_fuzz_dict_write(const mbx_policy *p, const char *code, size_t len, FILE *f,
                         mbx_error *err);

#endif
