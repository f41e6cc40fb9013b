"""Exact conversion between Python values and the JSON the C API speaks (done by the extension
module, _moonbox.c: to_json and from_json; this file holds the classes it makes).

Python -> guest: None is null (json.null in the guest), bool, int (must fit in 64 bits: the
guest's integers are int64, and a larger one is refused rather than rounded), float (finite;
NaN and infinities have no JSON form), str, bytes ({"$bytes": base64}, a Lua string with any
bytes), list/tuple (array), dict with str keys (object). Anything else, or a cycle, raises
TypeError/ValueError naming the path.

guest -> Python: as json.loads would, integers exact (Python ints), with the reserved
one-member objects decoded: {"$bytes": "..."} to bytes, {"$number": "nan" | "inf" | "-inf"}
to a float, and the forms of values JSON cannot hold to the small classes below:
{"$function": where} to LuaFunction, {"$thread": status} to LuaThread, {"$userdata": name}
to LuaUserdata, {"$cycle": path} to LuaCycle (docs/result.md).
"""

class _Described:
    """A guest value a result can only describe: equal when the description is."""
    __slots__ = ("_text",)
    _field = ""

    def __init__(self, text):
        self._text = text

    def __eq__(self, other):
        return type(other) is type(self) and other._text == self._text

    def __hash__(self):
        return hash((type(self).__name__, self._text))

    def __repr__(self):
        return "%s(%s=%r)" % (type(self).__name__, self._field, self._text)


class LuaFunction(_Described):
    """A function in a result: where is "chunk:line" for a Lua function, "builtin" for C."""
    _field = "where"

    @property
    def where(self):
        return self._text


class LuaThread(_Described):
    """A coroutine in a result, with what coroutine.status said of it."""
    _field = "status"

    @property
    def status(self):
        return self._text


class LuaUserdata(_Described):
    """A userdata in a result (e.g. an open file), named by its type ("FILE*")."""
    _field = "name"

    @property
    def name(self):
        return self._text


class LuaCycle(_Described):
    """A table that is one of its own enclosing tables: path names that table ("value")."""
    _field = "path"

    @property
    def path(self):
        return self._text
