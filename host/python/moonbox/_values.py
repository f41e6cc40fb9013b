"""Exact conversion between Python values and the JSON the C API speaks.

Python -> guest: None is null (json.null in the guest), bool, int (must fit in 64 bits: the
guest's integers are int64, and a larger one is refused rather than rounded), float (finite;
NaN and infinities have no JSON form), str, bytes ({"$bytes": base64}, a Lua string with any
bytes), list/tuple (array), dict with str keys (object). Anything else, or a cycle, raises
TypeError/ValueError naming the path.

guest -> Python: json.loads, which keeps integers exact (Python ints), with the reserved
one-member object {"$bytes": "..."} decoded back to bytes.
"""

import base64
import json
import math

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def _prepare(value, path, active):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError("%s: the integer %d does not fit in 64 bits (the guest's integers "
                             "are int64; pass it as a string or a float)" % (path, value))
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("%s: %r has no JSON form (pass a finite number or None)"
                             % (path, value))
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (list, tuple, dict)):
        if id(value) in active:
            raise ValueError("%s: the value contains itself (a cycle has no JSON form)" % path)
        active.add(id(value))
        try:
            if isinstance(value, dict):
                out = {}
                for k, v in value.items():
                    if not isinstance(k, str):
                        raise TypeError("%s: key %r is not a string (JSON object keys are "
                                        "strings)" % (path, k))
                    out[k] = _prepare(v, "%s.%s" % (path, k), active)
                return out
            return [_prepare(v, "%s[%d]" % (path, i), active) for i, v in enumerate(value)]
        finally:
            active.discard(id(value))
    raise TypeError("%s: a %s cannot be passed to the guest (use None, bool, int, float, str, "
                    "bytes, list or dict)" % (path, type(value).__name__))


def to_json(value, path="value"):
    """The JSON text of value, exactly (see the module's docstring)."""
    return json.dumps(_prepare(value, path, set()), ensure_ascii=False, allow_nan=False,
                      separators=(",", ":"))


def _bytes_hook(obj):
    if len(obj) == 1 and "$bytes" in obj and isinstance(obj["$bytes"], str):
        return base64.b64decode(obj["$bytes"])
    return obj


def from_json(text):
    """The Python value of JSON text the library produced (bytes or str)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    return json.loads(text, object_hook=_bytes_hook)
