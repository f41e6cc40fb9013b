# Type hints of the public API (PEP 561: the package ships py.typed). The runtime code is in
# sandbox.py and _values.py; tests/test_typing.py checks that every name and parameter here
# matches it.
from types import TracebackType
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Type, Union

__all__ = ["Limits", "MoonboxError", "Policy", "Result", "Sandbox", "check", "run", "run_async",
           "library_path", "version", "LuaFunction", "LuaThread", "LuaUserdata", "LuaCycle"]

library_path: str

Size = Union[int, str]  # bytes, or "64M", "512k"
Count = Union[int, str]  # a count, or "1e9"
Duration = Union[int, float, str]  # seconds, or "2s", "500ms"
Mount = Union[str, Tuple[str, str]]  # a host directory (read-only), or (directory, "ro" | "rw" | "overlay")
HostFunction = Callable[..., Any]

def version() -> str: ...

class MoonboxError(Exception):
    message: str
    status: str
    code: int
    def __init__(self, message: str, status: str = ..., code: int = ...) -> None: ...

class Limits:
    memory: Optional[Size]
    instructions: Optional[Count]
    timeout: Optional[Duration]
    output: Optional[Size]
    source: Optional[Size]
    host_calls: Optional[Count]
    result: Optional[Size]
    def __init__(self, memory: Optional[Size] = ..., instructions: Optional[Count] = ...,
                 timeout: Optional[Duration] = ..., output: Optional[Size] = ...,
                 source: Optional[Size] = ..., host_calls: Optional[Count] = ...,
                 result: Optional[Size] = ...) -> None: ...

class Policy:
    text: bytes
    base_dir: str
    def __init__(self, text: Union[str, bytes], base_dir: Optional[str] = ...) -> None: ...
    @classmethod
    def from_file(cls, path: str) -> "Policy": ...
    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], base_dir: Optional[str] = ...) -> "Policy": ...

class Result:
    status: str
    value: Any
    stdout_bytes: bytes
    stderr_bytes: bytes
    error: Optional[Dict[str, Any]]
    usage: Optional[Dict[str, Any]]
    pending: Optional[Dict[str, Any]]
    json: Dict[str, Any]
    changes: Optional[List[Dict[str, Any]]]
    @property
    def ok(self) -> bool: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...

class Sandbox:
    def __init__(self, limits: Union[Limits, Mapping[str, Any], None] = ...,
                 policy: Union[Policy, str, Mapping[str, Any], None] = ...,
                 mounts: Optional[Mapping[str, Mount]] = ...,
                 files: Optional[Mapping[str, Union[str, bytes]]] = ...,
                 functions: Optional[Mapping[str, HostFunction]] = ...,
                 externals: Optional[Sequence[str]] = ...,
                 env: Optional[Mapping[str, str]] = ...,
                 seed: Optional[int] = ...,
                 time: Optional[int] = ...,
                 deterministic: bool = ...,
                 ctrl_c: bool = ...,
                 isolate: Optional[Literal["none", "process"]] = ...,
                 modules: Optional[Mapping[str, Union[str, bytes]]] = ...,
                 _snapshot: Optional[bytes] = ...) -> None: ...
    @classmethod
    def restore(cls, snapshot: bytes, **kwargs: Any) -> "Sandbox": ...
    def run(self, code: Union[str, bytes], inputs: Optional[Mapping[str, Any]] = ...,
            chunk_name: Optional[str] = ...) -> Result: ...
    def resume(self, value: Any = ...) -> Result: ...
    async def run_async(self, code: Union[str, bytes], inputs: Optional[Mapping[str, Any]] = ...,
                        chunk_name: Optional[str] = ...) -> Result: ...
    async def resume_async(self, value: Any = ...) -> Result: ...
    def resume_error(self, message: str) -> Result: ...
    def interrupt(self) -> None: ...
    @property
    def paused(self) -> bool: ...
    @property
    def poisoned(self) -> bool: ...
    def reset(self) -> None: ...
    def checkpoint(self) -> None: ...
    def rewind(self) -> None: ...
    def set_stdin(self, source: Union[bytes, bytearray, memoryview, str, int, Any]) -> None: ...
    def snapshot(self) -> bytes: ...
    def changes(self, content: bool = ...) -> Optional[List[Dict[str, Any]]]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Sandbox": ...
    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> bool: ...

def run(code: Union[str, bytes], inputs: Optional[Mapping[str, Any]] = ..., **kwargs: Any) -> Result: ...
async def run_async(code: Union[str, bytes], inputs: Optional[Mapping[str, Any]] = ...,
                    **kwargs: Any) -> Result: ...
def check(code: Union[str, bytes], inputs: Optional[Mapping[str, Any]] = ...,
          **kwargs: Any) -> Dict[str, Any]: ...

class _Described:
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class LuaFunction(_Described):
    @property
    def where(self) -> str: ...

class LuaThread(_Described):
    @property
    def status(self) -> str: ...

class LuaUserdata(_Described):
    @property
    def name(self) -> str: ...

class LuaCycle(_Described):
    @property
    def path(self) -> str: ...
