/* host/options/fuzz_flags.h -- the flags `moonbox fuzz` hands the moonbox-fuzz engine: the
   two programs' one vocabulary, so both are built from this folder. */
#ifndef MBX_HOST_OPTIONS_FUZZ_FLAGS_H
#define MBX_HOST_OPTIONS_FUZZ_FLAGS_H

/* The engine's flags, which libFuzzer ignores (it skips every flag that starts with "--") and
   hands on unchanged to its -fork, -jobs and -merge children. */
#define MBXH_FUZZ_FLAG_TARGET "--moonbox-target="
#define MBXH_FUZZ_FLAG_OPTION "--moonbox-option=" /* one run option, as --name=value */
#define MBXH_FUZZ_FLAG_FINDINGS "--moonbox-findings="
#define MBXH_FUZZ_FLAG_REPRODUCE "--moonbox-reproduce="
#define MBXH_FUZZ_FLAG_NO_COVERAGE "--moonbox-no-coverage"
#define MBXH_FUZZ_FLAG_NO_DICTIONARY "--moonbox-no-dictionary"
/* Set by the engine for its children: the -dict= file already holds the constants. */
#define MBXH_FUZZ_FLAG_DICTIONARY_DONE "--moonbox-dictionary-done"

#endif
