/* capabilities/ffi.h -- native C functions a policy binds: signatures, prepared calls (libffi).
   No Lua here. */
#ifndef MBX_CAPABILITIES_FFI_H
#define MBX_CAPABILITIES_FFI_H

/*
** A binding is described by a signature string ("d(dd)": return type, then the argument
** types in parentheses) over a small alphabet of C scalar types. It is parsed and validated
** once, when the host binds it, into an mbxC_ffi_sig, and an ffi_cif is prepared once for it.
** The prepared binding (mbxC_native) is immutable from then on and shared, reference-counted,
** by the policy and every sandbox made from it: ffi_call only reads the cif, so sandboxes on
** different threads may call it at once.
**
** There is deliberately no pointer type in the alphabet: the guest never holds an address.
** Strings go in as 'z' (a borrowed, NUL-terminated copy valid for the call) and come out as
** 'o' (bytes the function writes into a buffer moonbox owns). The stdlib converts Lua values
** to mbxC_ffi_value before it calls through the port; nothing here can raise or longjmp.
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h" /* the alphabet, mbxC_ffi_value and mbxC_ffi_sig */

/* Parse and validate text into *sig. Returns 0, or -1 with why naming the 1-based byte, what
   was found there and what was expected, e.g. "signature 'd(dx)': unknown type 'x' at byte 4
   (use v b c C s S i I l L f d z o)". */
int mbxC_ffi_parse(const char *text, mbxC_ffi_sig *sig, char *why, size_t why_size);

/* A prepared binding. Opaque: it holds the ffi_cif. */
typedef struct mbxC_native mbxC_native;

/* Results of mbxC_native_new besides a binding. */
#define MBXC_FFI_INVALID (-1) /* why says what was wrong */
#define MBXC_FFI_NO_MEMORY (-2)

/* Parse signature and prepare the call of fn. Returns a binding with one reference, or NULL
   with *status set to MBXC_FFI_INVALID (why filled) or MBXC_FFI_NO_MEMORY. */
mbxC_native *mbxC_native_new(const char *signature, void (*fn)(void), int *status, char *why,
                             size_t why_size);
/* Take one more reference (the binding is shared by a policy and its sandboxes' ports). */
mbxC_native *mbxC_native_ref(mbxC_native *n);
/* Drop one reference; the last frees the binding. NULL is a no-op. */
void mbxC_native_unref(mbxC_native *n);
/* The parsed signature (for the stdlib's conversions). */
const mbxC_ffi_sig *mbxC_native_sig(const mbxC_native *n);

/* Call the function with sig->nargs converted arguments and store the result in *ret
   (nothing for 'v'). For an 'o' return, out/out_cap is the buffer passed as the two extra
   trailing arguments and ret->o the length the function returned (the caller checks it
   against out_cap). Never raises. */
void mbxC_native_call(const mbxC_native *n, const mbxC_ffi_value *args, char *out, size_t out_cap,
                      mbxC_ffi_value *ret);

#endif
