"""moonbox: run untrusted, agent-generated Lua 5.4 in-process with budgets and capabilities.

    from moonbox import Sandbox, Limits
    with Sandbox(limits=Limits(memory="64M", instructions=10_000_000, timeout=1.0)) as sb:
        r = sb.run("return #input.items", inputs={"input": {"items": [1, 2, 3]}})
        r.status, r.value, r.stdout, r.error, r.usage

A C extension module (runs, results, values, host calls, Ctrl-C) and ctypes (the rest) over
libmoonbox (found through $MOONBOX_LIBRARY, the path recorded at install, or the repository's
build directories). await sb.run_async(...) / moonbox.run_async(...) keep an event loop free.
docs/agents.md shows it wired into an agent as a tool.
"""

from ._native import library_path
from ._values import LuaCycle, LuaFunction, LuaThread, LuaUserdata
from .sandbox import (Limits, MoonboxError, Policy, Result, Sandbox, check, get_hibernate_after,
                      run, run_async, set_hibernate_after)

__all__ = ["Limits", "MoonboxError", "Policy", "Result", "Sandbox", "check", "run", "run_async",
           "library_path", "version", "LuaFunction", "LuaThread", "LuaUserdata", "LuaCycle",
           "set_hibernate_after", "get_hibernate_after"]


def version():
    """The version of the linked libmoonbox."""
    from ._native import lib
    return lib.mbx_version().decode()
