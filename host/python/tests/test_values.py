"""The extension's value conversion against Python's json module, the reference the binding
used before it was written in C: to_json gives the text json.dumps gives (with the binding's
{"$bytes": base64} for bytes), from_json the value json.loads gives (with the reserved
one-member forms decoded), and random values survive a trip through the guest unchanged."""

import base64
import json
import math
import random
import unittest

import moonbox
from moonbox import LuaCycle, LuaFunction, LuaThread, LuaUserdata, Sandbox
from moonbox import _native

FORMS = {"$function": LuaFunction, "$thread": LuaThread, "$userdata": LuaUserdata,
         "$cycle": LuaCycle}
NUMBERS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def reference_hook(obj):
    if len(obj) == 1:
        (k, v), = obj.items()
        if isinstance(v, str):
            if k == "$bytes":
                return base64.b64decode(v)
            if k == "$number" and v in NUMBERS:
                return NUMBERS[v]
            if k in FORMS:
                return FORMS[k](v)
    return obj


def reference_dumps(value):
    def prep(v):
        if isinstance(v, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(bytes(v)).decode()}
        if isinstance(v, dict):
            return {k: prep(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [prep(x) for x in v]
        return v
    return json.dumps(prep(value), ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


STRINGS = ["", "a", "h\u00e9llo", "\u65e5\u672c", "\U0001F600", "q\"uote", "back\\slash",
           "nl\nt\tcr\r", "\x00nul", "\x1f\x7f", "/slash", "\u2028"]


def random_value(rng, depth=0):
    kind = rng.randrange(10 if depth < 4 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 2 ** 53 + 1, -(2 ** 63), 2 ** 63 - 1, rng.randrange(-10 ** 9,
                                                                                      10 ** 9)])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e300, 1e-300, 0.1, 3.0, -2.5e-8, 1.7976931348623157e308])
    if kind in (4, 5):
        return rng.choice(STRINGS) + rng.choice(STRINGS)
    if kind == 6:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(6)))
    if kind in (7, 8):
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(1, 4))]
    return {"k%d%s" % (i, rng.choice(STRINGS[:4])): random_value(rng, depth + 1)
            for i in range(rng.randrange(1, 4))}


def as_guest_returns(v):
    """A Lua string is bytes: one that is valid UTF-8 comes back as a str."""
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return v
    if isinstance(v, dict):
        return {k: as_guest_returns(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_guest_returns(x) for x in v]
    return v


class Values(unittest.TestCase):
    def test_to_json_is_json_dumps(self):
        rng = random.Random(7)
        for _ in range(500):
            v = {"x": random_value(rng)}
            self.assertEqual(_native.ext.to_json(v, "inputs"), reference_dumps(v))

    def test_from_json_is_json_loads(self):
        texts = [b'{"a":[1,-2,3.5,1e400,-0.0,true,false,null],"b":"\\u00e9\\ud83d\\ude00\\n"}',
                 b'{"$bytes":"/w=="}', b'{"$number":"-inf"}', b'{"$function":"main.lua:3"}',
                 b'[{"$thread":"dead"},{"$userdata":"FILE*"},{"$cycle":"value.a"}]',
                 b'{"$bytes":1}', b'{"$bytes":"AA==","x":1}', b'"\\ud800"', b'123456789012345678901',
                 b'-5', b'0', b'[]', b'{}', b' [ 1 , { "a" : "b" } ] ']
        for t in texts:
            want = json.loads(t, object_hook=reference_hook)
            got = _native.ext.from_json(t)
            self.assertEqual(repr(got), repr(want), t)
        for bad in [b"", b"[1,", b'{"a" 1}', b"tru", b"[1]x", b'"\\x"', b"01"]:
            with self.assertRaises(ValueError, msg=bad):
                _native.ext.from_json(bad)

    def test_values_come_back_from_the_guest_unchanged(self):
        rng = random.Random(11)
        with Sandbox() as sb:
            for _ in range(300):
                v = random_value(rng)
                r = sb.run("return x", inputs={"x": v})
                self.assertEqual(r.status, "ok", r.error)
                self.assertEqual(repr(r.value), repr(as_guest_returns(v)))
                self.assertEqual(repr(r.json["value"]), repr(r.value))  # the lazy json agrees


if __name__ == "__main__":
    unittest.main()
