/* The binding's value conversion, both ways (see _values.h). */
#include "_values.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

static PyObject *form_classes[4]; /* LuaFunction, LuaThread, LuaUserdata, LuaCycle */
static PyObject *a2b_base64;      /* binascii.a2b_base64 */

static PyObject *new_ref(PyObject *o) {
  Py_INCREF(o);
  return o;
}

/* ---- Python -> JSON text (the inputs, a resume value, a host function's reply) ---------- */

static int enc_grow(mbxpy_encoder *e, size_t more) {
  if (e->len + more <= e->cap) return 0;
  size_t cap = e->cap * 2;
  while (cap < e->len + more)
    cap *= 2;
  char *p = e->p == e->small ? PyMem_Malloc(cap) : PyMem_Realloc(e->p, cap);
  if (p == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  if (e->p == e->small) memcpy(p, e->small, e->len);
  e->p = p;
  e->cap = cap;
  return 0;
}

static int enc_put(mbxpy_encoder *e, const char *s, size_t n) {
  if (enc_grow(e, n) < 0) return -1;
  memcpy(e->p + e->len, s, n);
  e->len += n;
  return 0;
}

void mbxpy_enc_free(mbxpy_encoder *e) {
  if (e->p != e->small) PyMem_Free(e->p);
}

/* "inputs.items[2].name", as _values._prepare names it. */
static PyObject *enc_path(mbxpy_encoder *e) {
  PyObject *path = PyUnicode_FromString(e->root);
  for (int i = 0; path != NULL && i < e->depth; i++) {
    PyObject *next = PyLong_Check(e->keys[i]) ? PyUnicode_FromFormat("%U[%S]", path, e->keys[i])
                                              : PyUnicode_FromFormat("%U.%U", path, e->keys[i]);
    Py_DECREF(path);
    path = next;
  }
  return path;
}

static int enc_fail(mbxpy_encoder *e, PyObject *type, const char *fmt, PyObject *arg) {
  PyObject *path = enc_path(e);
  if (path == NULL) return -1;
  PyErr_Format(type, fmt, path, arg);
  Py_DECREF(path);
  return -1;
}

static int enc_string(mbxpy_encoder *e, const char *s, Py_ssize_t n) {
  static const char hex[] = "0123456789abcdef";
  if (enc_grow(e, (size_t)n * 6 + 2) < 0) return -1; /* the worst case: every byte \u00XX */
  char *o = e->p + e->len;
  *o++ = '"';
  for (Py_ssize_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') {
      *o++ = (char)c;
      continue;
    }
    *o++ = '\\';
    switch (c) {
    case '"':
      *o++ = '"';
      break;
    case '\\':
      *o++ = '\\';
      break;
    case '\n':
      *o++ = 'n';
      break;
    case '\r':
      *o++ = 'r';
      break;
    case '\t':
      *o++ = 't';
      break;
    case '\b':
      *o++ = 'b';
      break;
    case '\f':
      *o++ = 'f';
      break;
    default:
      *o++ = 'u';
      *o++ = '0';
      *o++ = '0';
      *o++ = hex[c >> 4];
      *o++ = hex[c & 15];
    }
  }
  *o++ = '"';
  e->len = (size_t)(o - e->p);
  return 0;
}

/* PyUnicode_AsUTF8AndSize: in the limited API from 3.10 only, but exported by every CPython 3;
   found at init, it reads a str's UTF-8 without a bytes object per string (NULL: the copy). */
static const char *(*utf8_and_size)(PyObject *, Py_ssize_t *);

static int enc_str(mbxpy_encoder *e, PyObject *s) {
  if (utf8_and_size != NULL) {
    Py_ssize_t n;
    const char *p = utf8_and_size(s, &n); /* a lone surrogate: UnicodeEncodeError, as before */
    return p == NULL ? -1 : enc_string(e, p, n);
  }
  PyObject *b = PyUnicode_AsUTF8String(s);
  if (b == NULL) return -1;
  int rc = enc_string(e, PyBytes_AsString(b), PyBytes_Size(b));
  Py_DECREF(b);
  return rc;
}

static int enc_bytes(mbxpy_encoder *e, const unsigned char *s, Py_ssize_t n) {
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (enc_put(e, "{\"$bytes\":\"", 11) < 0 || enc_grow(e, (size_t)(n + 2) / 3 * 4 + 2) < 0)
    return -1;
  char *o = e->p + e->len;
  Py_ssize_t i = 0;
  for (; i + 2 < n; i += 3) {
    uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
    *o++ = b64[v >> 18];
    *o++ = b64[(v >> 12) & 63];
    *o++ = b64[(v >> 6) & 63];
    *o++ = b64[v & 63];
  }
  if (i < n) {
    uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
    *o++ = b64[v >> 18];
    *o++ = b64[(v >> 12) & 63];
    *o++ = i + 1 < n ? b64[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  e->len = (size_t)(o - e->p);
  return enc_put(e, "\"}", 2);
}

static int enc_push(mbxpy_encoder *e, PyObject *container) {
  for (int i = 0; i < e->depth; i++)
    if (e->stack[i] == container)
      return enc_fail(e, PyExc_ValueError,
                      "%U: the value contains itself (a cycle has no JSON form)", NULL);
  if (e->depth == (int)(sizeof e->stack / sizeof e->stack[0])) {
    PyErr_SetString(PyExc_RecursionError, "moonbox: a value nested more than 200 levels deep");
    return -1;
  }
  e->stack[e->depth] = container;
  e->keys[e->depth] = NULL;
  e->depth++;
  return 0;
}

static int enc_container(mbxpy_encoder *e, PyObject *v) {
  if (enc_push(e, v) < 0) return -1;
  int rc = 0;
  if (PyDict_Check(v)) {
    PyObject *k, *item;
    Py_ssize_t pos = 0;
    int first = 1;
    rc = enc_put(e, "{", 1);
    while (rc == 0 && PyDict_Next(v, &pos, &k, &item)) {
      if (!PyUnicode_Check(k)) {
        e->depth--; /* the path names the dict, as _prepare does */
        rc = enc_fail(e, PyExc_TypeError,
                      "%U: key %R is not a string (JSON object keys are strings)", k);
        e->depth++;
        break;
      }
      /* Own references: an allocation here may run the garbage collector, and a finalizer
         it runs may change the dict (as json's encoder, which iterates over a copy). */
      Py_INCREF(k);
      Py_INCREF(item);
      e->keys[e->depth - 1] = k;
      if ((!first && enc_put(e, ",", 1) < 0) || enc_str(e, k) < 0 || enc_put(e, ":", 1) < 0 ||
          mbxpy_enc_value(e, item) < 0)
        rc = -1;
      e->keys[e->depth - 1] = NULL;
      Py_DECREF(item);
      Py_DECREF(k);
      first = 0;
    }
    if (rc == 0) rc = enc_put(e, "}", 1);
  } else {
    Py_ssize_t n = PyList_Check(v) ? PyList_Size(v) : PyTuple_Size(v);
    rc = enc_put(e, "[", 1);
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
      PyObject *item = PyList_Check(v) ? PyList_GetItem(v, i) : PyTuple_GetItem(v, i);
      PyObject *index = PyLong_FromSsize_t(i);
      if (item == NULL || index == NULL) {
        Py_XDECREF(index);
        rc = -1;
        break;
      }
      e->keys[e->depth - 1] = index;
      Py_INCREF(item); /* a list may shrink under a __repr__ called for a message */
      if ((i > 0 && enc_put(e, ",", 1) < 0) || mbxpy_enc_value(e, item) < 0) rc = -1;
      Py_DECREF(item);
      e->keys[e->depth - 1] = NULL;
      Py_DECREF(index);
      n = PyList_Check(v) ? PyList_Size(v) : n;
    }
    if (rc == 0) rc = enc_put(e, "]", 1);
  }
  e->depth--;
  return rc;
}

int mbxpy_enc_value(mbxpy_encoder *e, PyObject *v) {
  char buf[32];
  if (v == Py_None) return enc_put(e, "null", 4);
  if (v == Py_True) return enc_put(e, "true", 4);
  if (v == Py_False) return enc_put(e, "false", 5);
  if (PyUnicode_Check(v)) return enc_str(e, v);
  if (PyLong_Check(v)) {
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (overflow)
      return enc_fail(e, PyExc_ValueError,
                      "%U: the integer %S does not fit in 64 bits (the guest's integers are "
                      "int64; pass it as a string or a float)",
                      v);
    int len = snprintf(buf, sizeof buf, "%lld", n);
    return enc_put(e, buf, (size_t)len);
  }
  if (PyFloat_Check(v)) {
    double d = PyFloat_AsDouble(v);
    if (d != d || d - d != 0)
      return enc_fail(e, PyExc_ValueError, "%U: %R has no JSON form (pass a finite number or None)",
                      v);
    char *s = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL) return -1;
    int rc = enc_put(e, s, strlen(s));
    PyMem_Free(s);
    return rc;
  }
  if (PyDict_Check(v) || PyList_Check(v) || PyTuple_Check(v)) {
    if (Py_EnterRecursiveCall(" while converting a value for the guest")) return -1;
    int rc = enc_container(e, v);
    Py_LeaveRecursiveCall();
    return rc;
  }
  if (PyBytes_Check(v))
    return enc_bytes(e, (const unsigned char *)PyBytes_AsString(v), PyBytes_Size(v));
  if (PyByteArray_Check(v) || PyMemoryView_Check(v)) {
    PyObject *b = PyBytes_FromObject(v);
    if (b == NULL) return -1;
    int rc = enc_bytes(e, (const unsigned char *)PyBytes_AsString(b), PyBytes_Size(b));
    Py_DECREF(b);
    return rc;
  }
  PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(v), "__name__");
  if (name == NULL) return -1;
  int rc = enc_fail(e, PyExc_TypeError,
                    "%U: a %U cannot be passed to the guest (use None, bool, int, float, str, "
                    "bytes, list or dict)",
                    name);
  Py_DECREF(name);
  return rc;
}

void mbxpy_enc_init(mbxpy_encoder *e, const char *root) {
  e->p = e->small;
  e->len = 0;
  e->cap = sizeof e->small;
  e->depth = 0;
  e->root = root;
}

/* ---- JSON text -> Python (results, host call arguments, change sets) ------------------ */

/* The library wrote the text (valid JSON, UTF-8, nesting bounded by its own limit of 128), but
   the parser still checks every byte: a malformed text is a ValueError, never a bad read. */
typedef struct {
  const char *p, *end;
  int depth;
} parser;

static PyObject *parse_value(parser *ps);

static PyObject *parse_fail(parser *ps) {
  (void)ps;
  if (!PyErr_Occurred())
    PyErr_SetString(PyExc_ValueError, "moonbox: malformed JSON from the library");
  return NULL;
}

static void skip_ws(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
    ps->p++;
}

static int hex4(const char *s, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

static PyObject *parse_string(parser *ps) {
  const char *start = ++ps->p, *s = start;
  while (s < ps->end && *s != '"' && *s != '\\')
    s++;
  if (s < ps->end && *s == '"') { /* no escapes: the common case */
    ps->p = s + 1;
    return PyUnicode_DecodeUTF8(start, s - start, "strict");
  }
  /* Escapes: decode into UTF-8 (a lone surrogate as its 3 bytes, decoded with surrogatepass
     into the lone surrogate json.loads gives). */
  size_t cap = (size_t)(ps->end - start);
  char *buf = PyMem_Malloc(cap + 1), *o = buf;
  if (buf == NULL) return PyErr_NoMemory();
  s = start;
  while (s < ps->end && *s != '"') {
    if (*s != '\\') {
      *o++ = *s++;
      continue;
    }
    if (++s >= ps->end) break;
    char c = *s++;
    unsigned cp;
    switch (c) {
    case '"':
    case '\\':
    case '/':
      *o++ = c;
      continue;
    case 'n':
      *o++ = '\n';
      continue;
    case 'r':
      *o++ = '\r';
      continue;
    case 't':
      *o++ = '\t';
      continue;
    case 'b':
      *o++ = '\b';
      continue;
    case 'f':
      *o++ = '\f';
      continue;
    case 'u':
      if (ps->end - s < 4 || hex4(s, &cp) < 0) goto bad;
      s += 4;
      if (cp >= 0xD800 && cp < 0xDC00 && ps->end - s >= 6 && s[0] == '\\' && s[1] == 'u') {
        unsigned lo;
        if (hex4(s + 2, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          s += 6;
        }
      }
      if (cp < 0x80) {
        *o++ = (char)cp;
      } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | cp >> 6);
        *o++ = (char)(0x80 | (cp & 63));
      } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | cp >> 12);
        *o++ = (char)(0x80 | ((cp >> 6) & 63));
        *o++ = (char)(0x80 | (cp & 63));
      } else {
        *o++ = (char)(0xF0 | cp >> 18);
        *o++ = (char)(0x80 | ((cp >> 12) & 63));
        *o++ = (char)(0x80 | ((cp >> 6) & 63));
        *o++ = (char)(0x80 | (cp & 63));
      }
      continue;
    default:
      goto bad;
    }
  }
  if (s >= ps->end) goto bad;
  ps->p = s + 1;
  PyObject *str = PyUnicode_DecodeUTF8(buf, o - buf, "surrogatepass");
  PyMem_Free(buf);
  return str;
bad:
  PyMem_Free(buf);
  return parse_fail(ps);
}

/* A number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static PyObject *parse_number(parser *ps) {
  const char *s = ps->p, *p = s, *end = ps->end;
  int is_float = 0;
  if (p < end && *p == '-') p++;
  if (p < end && *p == '0')
    p++;
  else if (p < end && *p >= '1' && *p <= '9')
    while (p < end && *p >= '0' && *p <= '9')
      p++;
  else
    return parse_fail(ps);
  if (p < end && *p == '.') {
    is_float = 1;
    if (++p >= end || *p < '0' || *p > '9') return parse_fail(ps);
    while (p < end && *p >= '0' && *p <= '9')
      p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    is_float = 1;
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || *p < '0' || *p > '9') return parse_fail(ps);
    while (p < end && *p >= '0' && *p <= '9')
      p++;
  }
  size_t n = (size_t)(p - s);
  if (n > 400) return parse_fail(ps);
  ps->p = p;
  char buf[401];
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (!is_float) {
    PyObject *v = PyLong_FromString(buf, NULL, 10);
    return v ? v : parse_fail(ps);
  }
  char *fend;
  double d = PyOS_string_to_double(buf, &fend, NULL); /* 1e400 is inf, as json.loads has it */
  if ((d == -1.0 && PyErr_Occurred()) || *fend != '\0') return parse_fail(ps);
  return PyFloat_FromDouble(d);
}

/* A one-member object {"$bytes" | "$number" | "$function" | ...: "text"}: its Python value,
   or NULL without an error when it is an ordinary object. */
static PyObject *parse_form(PyObject *key, PyObject *value) {
  static const char *const forms[] = {"$function", "$thread", "$userdata", "$cycle"};
  if (!PyUnicode_Check(value)) return NULL;
  PyObject *bytes_key = PyUnicode_AsUTF8String(key);
  if (bytes_key == NULL) return NULL;
  const char *k = PyBytes_AsString(bytes_key);
  PyObject *out = NULL;
  if (strcmp(k, "$bytes") == 0) {
    out = PyObject_CallFunctionObjArgs(a2b_base64, value, NULL);
  } else if (strcmp(k, "$number") == 0) {
    if (PyUnicode_CompareWithASCIIString(value, "nan") == 0)
      out = PyFloat_FromDouble(Py_NAN);
    else if (PyUnicode_CompareWithASCIIString(value, "inf") == 0)
      out = PyFloat_FromDouble(Py_HUGE_VAL);
    else if (PyUnicode_CompareWithASCIIString(value, "-inf") == 0)
      out = PyFloat_FromDouble(-Py_HUGE_VAL);
  } else {
    for (int i = 0; i < 4; i++)
      if (strcmp(k, forms[i]) == 0)
        out = PyObject_CallFunctionObjArgs(form_classes[i], value, NULL);
  }
  Py_DECREF(bytes_key);
  return out;
}

static PyObject *parse_object(parser *ps) {
  PyObject *d = PyDict_New();
  if (d == NULL) return NULL;
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == '}') {
    ps->p++;
    return d;
  }
  for (;;) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '"') break;
    PyObject *k = parse_string(ps);
    if (k == NULL) break;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':') {
      Py_DECREF(k);
      break;
    }
    ps->p++;
    PyObject *v = parse_value(ps);
    if (v == NULL || PyDict_SetItem(d, k, v) < 0) {
      Py_DECREF(k);
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      Py_DECREF(k);
      Py_DECREF(v);
      continue;
    }
    if (ps->p < ps->end && *ps->p == '}') {
      ps->p++;
      PyObject *form = PyDict_Size(d) == 1 && PyUnicode_GetLength(k) > 1 ? parse_form(k, v) : NULL;
      Py_DECREF(k);
      Py_DECREF(v);
      if (form == NULL && PyErr_Occurred()) {
        Py_DECREF(d);
        return NULL;
      }
      if (form != NULL) {
        Py_DECREF(d);
        return form;
      }
      return d;
    }
    Py_DECREF(k);
    Py_DECREF(v);
    break;
  }
  Py_DECREF(d);
  return parse_fail(ps);
}

static PyObject *parse_array(parser *ps) {
  PyObject *list = PyList_New(0);
  if (list == NULL) return NULL;
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == ']') {
    ps->p++;
    return list;
  }
  for (;;) {
    PyObject *v = parse_value(ps);
    if (v == NULL || PyList_Append(list, v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(list);
      return NULL;
    }
    Py_DECREF(v);
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == ']') {
      ps->p++;
      return list;
    }
    Py_DECREF(list);
    return parse_fail(ps);
  }
}

static PyObject *parse_value(parser *ps) {
  skip_ws(ps);
  if (ps->p >= ps->end) return parse_fail(ps);
  if (++ps->depth > 400) {
    PyErr_SetString(PyExc_ValueError, "moonbox: JSON nested too deeply");
    return NULL;
  }
  PyObject *v;
  size_t left = (size_t)(ps->end - ps->p);
  switch (*ps->p) {
  case '{':
    v = parse_object(ps);
    break;
  case '[':
    v = parse_array(ps);
    break;
  case '"':
    v = parse_string(ps);
    break;
  case 'n':
    v = left >= 4 && memcmp(ps->p, "null", 4) == 0 ? (ps->p += 4, new_ref(Py_None))
                                                   : parse_fail(ps);
    break;
  case 't':
    v = left >= 4 && memcmp(ps->p, "true", 4) == 0 ? (ps->p += 4, new_ref(Py_True))
                                                   : parse_fail(ps);
    break;
  case 'f':
    v = left >= 5 && memcmp(ps->p, "false", 5) == 0 ? (ps->p += 5, new_ref(Py_False))
                                                    : parse_fail(ps);
    break;
  default:
    v = parse_number(ps);
  }
  ps->depth--;
  return v;
}

PyObject *mbxpy_parse_json(const char *text, size_t len) {
  if (text == NULL) return PyErr_NoMemory();
  /* The two results of nearly every call, without a parser: a small integer and null. */
  if (len == 4 && memcmp(text, "null", 4) == 0) Py_RETURN_NONE;
  if (len > 0 && len < 18 && text[0] >= '0' && text[0] <= '9') {
    long long n = 0;
    size_t i = 0;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++)
      n = n * 10 + (text[i] - '0');
    if (i == len && (text[0] != '0' || len == 1)) return PyLong_FromLongLong(n);
  }
  parser ps = {text, text + len, 0};
  PyObject *v = parse_value(&ps);
  if (v == NULL) return NULL;
  skip_ws(&ps);
  if (ps.p != ps.end) {
    Py_DECREF(v);
    return parse_fail(&ps);
  }
  return v;
}

int mbxpy_values_init(PyObject *forms) {
  utf8_and_size =
      (const char *(*)(PyObject *, Py_ssize_t *))dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8AndSize");
  if (a2b_base64 == NULL) {
    PyObject *binascii = PyImport_ImportModule("binascii");
    a2b_base64 = binascii ? PyObject_GetAttrString(binascii, "a2b_base64") : NULL;
    Py_XDECREF(binascii);
    if (a2b_base64 == NULL) return -1;
  }
  for (int i = 0; i < 4; i++) {
    PyObject *old = form_classes[i];
    form_classes[i] = PyTuple_GetItem(forms, i);
    Py_XINCREF(form_classes[i]);
    Py_XDECREF(old);
  }
  return 0;
}
