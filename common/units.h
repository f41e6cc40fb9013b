/* common/units.h -- the values of settings, parsed by hand as docs/vocabulary.md writes them:
   sizes, durations, counts, epochs and seeds; and the messages that quote a user's value back.
   One parser for every front door: the CLI's flags, policy files and MCP arguments. */
#ifndef MBX_COMMON_UNITS_H
#define MBX_COMMON_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* How many bytes of a user's value are quoted back in a message. */
#define MBXU_QUOTE_MAX 40

/* printf into msg (msg_size bytes, truncated; nothing when msg is NULL or msg_size 0). */
void mbxU_msg(char *msg, size_t msg_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
** Copies a user's value for quoting in a message into buf (size >= 4): control bytes become
** '?' (a value is echoed to a terminal, and escape sequences in it could rewrite what the
** user sees) and a value longer than MBXU_QUOTE_MAX bytes is cut at a UTF-8 boundary
** and marked with "...".
*/
void mbxU_quote(const char *text, char *buf, size_t size);

/*
** Value parsers, used by the CLI (host/options/args.c), policy files (host/policy_json.c) and
** MCP arguments (host/mcp/tools.c). Each returns 0 and stores the value, or -1 and writes
** "<option>: <what is wrong> (<what to do>)" into msg, option being the setting's name in the
** caller's front door ("--memory", "limits.memory").
**   size:     "64M", "512k", "1GiB", "1.5M", "4096" (bytes); suffixes are case-insensitive
**             powers of 1024: k, kb, kib, m, mb, mib, g, gb, gib, and b for bytes.
**   duration: "500ms", "2s", "1.5s", "1m", "1h" into milliseconds; a bare number other
**             than 0 is refused so that "--timeout 5" cannot silently mean 5 ms.
**   count:    "1000000", "1e9", "2.5e6": any exact whole number.
*/
int mbxU_parse_size(const char *option, const char *text, uint64_t *out, char *msg,
                    size_t msg_size);
int mbxU_parse_duration(const char *option, const char *text, uint64_t *out, char *msg,
                        size_t msg_size);
int mbxU_parse_count(const char *option, const char *text, uint64_t *out, char *msg,
                     size_t msg_size);
/*   epoch:    "1700000000", "-86400", "0": whole seconds since 1970-01-01T00:00:00Z, with an
**             optional '-' (no '+', no fraction, no exponent, no unit). */
/*   seed:     "42", "18446744073709551615", "-1" (the same 64 bits as -1 as a Lua integer). */
int mbxU_parse_seed(const char *option, const char *text, uint64_t *out, char *msg,
                    size_t msg_size);
int mbxU_parse_epoch(const char *option, const char *text, int64_t *out, char *msg,
                     size_t msg_size);

#endif
