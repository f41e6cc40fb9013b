/* The binding's value conversion: Python values to the JSON text the C API takes, and the JSON
   text it returns to Python values (_values.c; the classes of described values are in
   _values.py). Every function is called with the GIL held. */
#ifndef MOONBOX_PY_VALUES_H
#define MOONBOX_PY_VALUES_H

#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* The text is built into a growable buffer; the path of a value is only spelled out when it
   fails (a stack of the containers and keys above it), so a good value costs no string work. */
typedef struct mbxpy_encoder {
  char *p;
  size_t len, cap;
  char small[512];
  PyObject *stack[200]; /* the containers being encoded (a cycle is one of them again) */
  PyObject *keys[200];  /* the key (str) or index (int) under each */
  int depth;
  const char *root;
} mbxpy_encoder;

/* Begins an empty text; root names the value in error messages ("inputs"). */
void mbxpy_enc_init(mbxpy_encoder *e, const char *root);
/* Appends v's JSON: 0, or -1 with TypeError/ValueError naming the path of what failed. */
int mbxpy_enc_value(mbxpy_encoder *e, PyObject *v);
void mbxpy_enc_free(mbxpy_encoder *e);

/* The Python value of JSON text (NULL text: MemoryError), with the reserved one-member forms
   decoded ($bytes, $number, $function, $thread, $userdata, $cycle). */
PyObject *mbxpy_parse_json(const char *text, size_t len);

/* Once, before the rest: forms is (LuaFunction, LuaThread, LuaUserdata, LuaCycle). */
int mbxpy_values_init(PyObject *forms);

#endif
