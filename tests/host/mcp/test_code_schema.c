/* tests/host/mcp/test_code_schema.c -- code mode's pure JSON work (host/mcp/code_schema.c): a
   guest's argument table checked and coerced by a tool's inputSchema, the Lua call signature
   search_tools shows, and a CallToolResult made into the guest's value or error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/mcp/code_tools.h"

/* server-memory's create_entities, as it lists it. */
static const char entities_schema[] =
    "{\"type\":\"object\",\"properties\":{\"entities\":{\"type\":\"array\",\"items\":{"
    "\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"entityType\":{"
    "\"type\":\"string\"},\"observations\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
    "\"required\":[\"name\",\"entityType\",\"observations\"],\"additionalProperties\":false}}},"
    "\"required\":[\"entities\"]}";

static json_t *parse(const char *text) {
  json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
  if (v == NULL) fail_msg("bad JSON in the test: %s", text);
  return v;
}

/* coerce(value) by schema: the JSON it gives ("" for a refusal, then msg holds the reason). */
static char *coerce(const char *schema_text, const char *value_text, char *msg, size_t size) {
  json_t *schema = parse(schema_text), *value = value_text ? parse(value_text) : NULL;
  json_t *out = mbxH_code_coerce(NULL, schema, value, msg, size);
  char *text = out ? json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS) : strdup("");
  json_decref(schema), json_decref(value), json_decref(out);
  return text;
}

static void expect_coerced(const char *schema, const char *value, const char *want) {
  char msg[300];
  char *got = coerce(schema, value, msg, sizeof msg);
  if (strcmp(got, want) != 0)
    fail_msg("%s by %s\n  gave '%s' (%s)\n  want '%s'", value, schema, got, got[0] ? "" : msg,
             want);
  free(got);
}

static void expect_refused(const char *schema, const char *value, const char *why) {
  char msg[300];
  char *got = coerce(schema, value, msg, sizeof msg);
  if (got[0] != '\0') fail_msg("%s by %s was accepted as %s", value, schema, got);
  if (strstr(msg, why) == NULL) fail_msg("%s: message '%s' lacks '%s'", value, msg, why);
  free(got);
}

static void arguments_are_checked_by_type_and_required(void **state) {
  (void)state;
  expect_coerced(entities_schema,
                 "{\"entities\":[{\"name\":\"a\",\"entityType\":\"t\",\"observations\":[\"x\"]}]}",
                 "{\"entities\":[{\"entityType\":\"t\",\"name\":\"a\",\"observations\":[\"x\"]}]}");
  expect_refused(entities_schema, "{}", "entities: required, missing");
  expect_refused(entities_schema, NULL, "entities: required, missing");
  expect_refused(entities_schema, "{\"entities\":5}", "entities: expected array, got an integer");
  expect_refused(entities_schema,
                 "{\"entities\":[{\"name\":1,\"entityType\":\"t\",\"observations\":{}}]}",
                 "entities[1].name: expected string, got an integer");
  expect_refused(
      entities_schema,
      "{\"entities\":[{\"name\":\"a\",\"entityType\":\"t\",\"observations\":{},\"x\":1}]}",
      "entities[1].x: not a field");
  expect_refused("{\"type\":\"object\",\"properties\":{\"mode\":{\"enum\":[\"a\",\"b\"]}}}",
                 "{\"mode\":\"c\"}", "mode: must be one of [\"a\",\"b\"]");
  expect_refused("{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"boolean\"}}}", "[1,2]",
                 "arguments: expected a table (object), got an array");
}

/* The Lua codec writes an empty table as {} and 2.0 as a float: the schema says what was
   meant. */
static void lua_values_are_coerced_by_the_schema(void **state) {
  (void)state;
  expect_coerced(entities_schema, "{\"entities\":{}}", "{\"entities\":[]}");
  expect_coerced(entities_schema,
                 "{\"entities\":[{\"name\":\"a\",\"entityType\":\"t\",\"observations\":{}}]}",
                 "{\"entities\":[{\"entityType\":\"t\",\"name\":\"a\",\"observations\":[]}]}");
  static const char nums[] = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},"
                             "\"x\":{\"type\":\"number\"}}}";
  expect_coerced(nums, "{\"n\":2.0,\"x\":3}", "{\"n\":2,\"x\":3}");
  expect_refused(nums, "{\"n\":2.5}", "n: expected integer, got a float");
  /* $ref into $defs, anyOf with null, nullable type lists */
  static const char refs[] =
      "{\"type\":\"object\",\"$defs\":{\"ids\":{\"type\":\"array\",\"items\":{\"type\":"
      "\"integer\"}}},\"properties\":{\"ids\":{\"$ref\":\"#/$defs/ids\"},\"opt\":{\"anyOf\":[{"
      "\"type\":\"null\"},{\"type\":\"array\"}]},\"t\":{\"type\":[\"string\",\"null\"]}}}";
  expect_coerced(refs, "{\"ids\":[1.0,2],\"opt\":{},\"t\":\"x\"}",
                 "{\"ids\":[1,2],\"opt\":[],\"t\":\"x\"}");
  expect_refused(refs, "{\"ids\":[\"a\"]}", "ids[1]: expected integer, got a string");
  /* level i is anyOf [level i-1, level i-1] through $refs: 2^30 paths without a step cap */
  char *deep = malloc(1 << 16);
  size_t n = (size_t)sprintf(deep, "{\"$defs\":{\"l0\":{\"type\":\"string\"}");
  for (int i = 1; i <= 30; i++)
    n += (size_t)sprintf(
        deep + n, ",\"l%d\":{\"anyOf\":[{\"$ref\":\"#/$defs/l%d\"},{\"$ref\":\"#/$defs/l%d\"}]}", i,
        i - 1, i - 1);
  sprintf(deep + n, "},\"$ref\":\"#/$defs/l30\"}");
  expect_refused(deep, "1", "too complex to check");
  /* Steps count the nodes each branch copies: 4,096 paths that each copy (then refuse) a
     1,000-key object were 4 million node copies of host time under a 100,000-step cap; now the
     copies spend the steps (a hostile upstream's schema and a guest's table multiplied). */
  n = (size_t)sprintf(deep, "{\"$defs\":{\"l0\":{\"type\":\"object\",\"required\":[\"zz\"]}");
  for (int i = 1; i <= 12; i++)
    n += (size_t)sprintf(
        deep + n, ",\"l%d\":{\"anyOf\":[{\"$ref\":\"#/$defs/l%d\"},{\"$ref\":\"#/$defs/l%d\"}]}", i,
        i - 1, i - 1);
  sprintf(deep + n, "},\"$ref\":\"#/$defs/l12\"}");
  char *wide = malloc(1 << 16);
  size_t w = (size_t)sprintf(wide, "{");
  for (int i = 0; i < 1000; i++)
    w += (size_t)sprintf(wide + w, "%s\"k%d\":%d", i ? "," : "", i, i);
  sprintf(wide + w, "}");
  expect_refused(deep, wide, "too complex to check");
  free(wide);
  free(deep);
  /* no schema at all: anything goes, unchanged */
  expect_coerced("{}", "{\"a\":[1,{}]}", "{\"a\":[1,{}]}");
}

static void signatures_are_lua_calls(void **state) {
  (void)state;
  json_t *schema = parse(entities_schema);
  char *sig = mbxH_code_signature("memory", "create_entities", schema);
  assert_string_equal(sig, "tools.memory.create_entities{entities = {{name = \"...\", entityType "
                           "= \"...\", observations = {\"...\"}}}}");
  free(sig);
  sig = mbxH_code_signature("mem", "create-entities", schema);
  assert_non_null(strstr(sig, "tools.mem[\"create-entities\"]{entities = "));
  free(sig);
  json_decref(schema);
  schema = parse("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},\"x\":{"
                 "\"type\":\"number\"},\"ok\":{\"type\":\"boolean\"},\"mode\":{\"enum\":[\"fast\","
                 "\"slow\"]},\"not-ident\":{\"type\":\"string\"},\"end\":{}}}");
  sig = mbxH_code_signature("s", "t", schema);
  assert_string_equal(sig, "tools.s.t{n = 0, x = 0.0, ok = true, mode = \"fast\", "
                           "[\"not-ident\"] = \"...\", [\"end\"] = ...}");
  free(sig);
  json_decref(schema);
  schema = parse("{\"type\":\"object\"}");
  sig = mbxH_code_signature("s", "ping", schema);
  assert_string_equal(sig, "tools.s.ping()");
  free(sig);
  json_decref(schema);
  /* a $ref loop ends */
  schema = parse("{\"type\":\"object\",\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{"
                 "\"next\":{\"$ref\":\"#/$defs/n\"}}}},\"properties\":{\"list\":{\"$ref\":\"#/"
                 "$defs/n\"}}}");
  sig = mbxH_code_signature("s", "t", schema);
  assert_non_null(sig);
  assert_non_null(strstr(sig, "next = {next = "));
  free(sig);
  json_decref(schema);
}

static void results_become_values_or_errors(void **state) {
  (void)state;
  static const struct {
    const char *result, *value, *error;
  } cases[] = {
      {"{\"content\":[{\"type\":\"text\",\"text\":\"{}\"}],\"structuredContent\":{\"a\":[1]}}",
       "{\"a\":[1]}", NULL},
      {"{\"content\":[{\"type\":\"text\",\"text\":\"{\\\"n\\\": 2}\"}]}", "{\"n\":2}", NULL},
      {"{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hi\"}]}", "\"Echo: hi\"", NULL},
      {"{\"content\":[{\"type\":\"text\",\"text\":\"1\"},{\"type\":\"image\",\"data\":\"AA==\","
       "\"mimeType\":\"image/png\"}]}",
       "[1,{\"type\":\"image\",\"data\":\"AA==\",\"mimeType\":\"image/png\"}]", NULL},
      {"{\"content\":[]}", "null", NULL},
      {"{\"content\":[{\"type\":\"text\",\"text\":\"Entity x not found\"}],\"isError\":true}", NULL,
       "Entity x not found"},
      {"{\"content\":[],\"isError\":true}", NULL, "the tool failed (no message)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    json_t *r = parse(cases[i].result);
    char *value, *error;
    int kind = mbxH_code_result(r, &value, &error);
    json_decref(r);
    if (cases[i].value) {
      assert_int_equal(kind, 0);
      assert_string_equal(value, cases[i].value);
    } else {
      assert_int_equal(kind, 1);
      assert_string_equal(error, cases[i].error);
    }
    free(value), free(error);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arguments_are_checked_by_type_and_required),
      cmocka_unit_test(lua_values_are_coerced_by_the_schema),
      cmocka_unit_test(signatures_are_lua_calls),
      cmocka_unit_test(results_become_values_or_errors),
  };
  return cmocka_run_group_tests_name("host/mcp/code_schema", tests, NULL, NULL);
}
