"""The type stubs (moonbox/__init__.pyi, shipped with py.typed) describe the runtime API: every
public name has a stub, and every stubbed function and method takes the parameters the code
takes, in the same order, with defaults where the code has them."""
import ast
import inspect
import os
import unittest

import moonbox

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
STUB = os.path.join(os.path.dirname(moonbox.__file__), "__init__.pyi")


def _stub_tree():
    with open(STUB, encoding="utf-8") as f:
        return ast.parse(f.read(), STUB)


def _params(fn):
    """(name, has_default) of a stub's def, self and cls included."""
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [False] * (len(pos) - len(a.defaults)) + [True] * len(a.defaults)
    out = [(p.arg, d) for p, d in zip(pos, defaults)]
    if a.vararg:
        out.append(("*" + a.vararg.arg, False))
    out += [(p.arg, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append(("**" + a.kwarg.arg, False))
    return out


def _runtime_params(obj):
    out = []
    for p in inspect.signature(obj).parameters.values():
        name = p.name
        if p.kind is p.VAR_POSITIONAL:
            name = "*" + name
        elif p.kind is p.VAR_KEYWORD:
            name = "**" + name
        out.append((name, p.default is not p.empty))
    return out


class StubsMatchTheCode(unittest.TestCase):
    def test_py_typed_is_shipped(self):
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(STUB), "py.typed")))

    def test_every_public_name_has_a_stub(self):
        tree = _stub_tree()
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
        for name in moonbox.__all__:
            self.assertIn(name, names, "%s is public but has no stub" % name)

    def test_signatures_match(self):
        checked = 0
        for node in _stub_tree().body:
            if isinstance(node, FUNCTIONS) and hasattr(moonbox, node.name):
                self.assertEqual(_params(node), _runtime_params(getattr(moonbox, node.name)),
                                 node.name)
                checked += 1
            if isinstance(node, ast.ClassDef) and hasattr(moonbox, node.name):
                cls = getattr(moonbox, node.name)
                for item in node.body:
                    if not isinstance(item, FUNCTIONS):
                        continue
                    decorators = {d.id for d in item.decorator_list if isinstance(d, ast.Name)}
                    runtime = inspect.getattr_static(cls, item.name, None)
                    self.assertIsNotNone(runtime, "%s.%s is stubbed but absent" %
                                         (node.name, item.name))
                    if "property" in decorators:
                        self.assertIsInstance(runtime, property, "%s.%s" % (node.name, item.name))
                        continue
                    if item.name in ("__eq__", "__hash__", "__exit__", "__enter__"):
                        continue
                    fn = runtime.__func__ if isinstance(runtime, (classmethod, staticmethod)) \
                        else runtime
                    self.assertEqual(_params(item), _runtime_params(fn),
                                     "%s.%s" % (node.name, item.name))
                    checked += 1
        self.assertGreater(checked, 15)


if __name__ == "__main__":
    unittest.main()
