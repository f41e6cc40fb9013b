/* tests/common/test_base64.c -- unit tests of common/base64.c: the RFC 4648 vectors, every
   byte value, and the malformed texts decode refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/base64.h"

static void test_base64_rfc4648_vectors(void **state) {
  static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  (void)state;
  for (size_t i = 0; i < 7; i++) {
    char out[16];
    unsigned char back[16];
    size_t n = strlen(plain[i]);
    assert_int_equal(mbxU_base64_encoded_len(n), strlen(coded[i]));
    mbxU_base64_encode((const unsigned char *)plain[i], n, out);
    assert_memory_equal(out, coded[i], strlen(coded[i]));
    assert_int_equal(mbxU_base64_decode(coded[i], strlen(coded[i]), back), n);
    assert_memory_equal(back, plain[i], n);
  }
}

static void test_base64_all_bytes(void **state) {
  unsigned char raw[256], back[256];
  char coded[344];
  (void)state;
  for (int i = 0; i < 256; i++)
    raw[i] = (unsigned char)i;
  for (size_t n = 0; n <= 256; n++) {
    mbxU_base64_encode(raw, n, coded);
    size_t len = mbxU_base64_encoded_len(n);
    assert_int_equal(mbxU_base64_decode(coded, len, back), n);
    assert_memory_equal(back, raw, n);
  }
}

static void test_base64_rejects_malformed(void **state) {
  static const char *const bad[] = {
      "Zg=",      /* length not a multiple of 4 */
      "Zg",       /* unpadded */
      "Z===",     /* too much padding */
      "====",     /* only padding */
      "Zg==Zg==", /* padding in the middle */
      "Z=g=",     /* padding then data */
      "Zh==",     /* non-zero bits under the padding */
      "Zm9=",     /* likewise, one pad */
      "Zm9v!A==", /* not in the alphabet */
      "Zm9v YQ=", /* whitespace */
      "Zm-_",     /* base64url is another alphabet */
  };
  unsigned char out[16];
  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(mbxU_base64_decode(bad[i], strlen(bad[i]), out), (size_t)-1);
  assert_int_equal(mbxU_base64_decode("Zm9v\0A==", 8, out), (size_t)-1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_base64_rfc4648_vectors),
      cmocka_unit_test(test_base64_all_bytes),
      cmocka_unit_test(test_base64_rejects_malformed),
  };
  return cmocka_run_group_tests_name("common/base64", tests, NULL, NULL);
}
