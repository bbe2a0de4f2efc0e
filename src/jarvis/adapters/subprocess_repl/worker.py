"""The REPL worker: a separate interpreter that runs model-written code for one session.

The host starts it as ``python -I -S -B worker.py`` (isolated mode, no site-packages) in a
private working directory, usually inside fresh network/PID namespaces, and speaks to it in
JSON lines on its stdin/stdout (the message shapes are the pydantic models of
``protocol.py``, exported to ``contracts/schemas/repl/``). This file imports the standard
library only: it must never import jarvis, so nothing of the host leaks into the sandbox.

Start-up, before any untrusted code runs: read the ``setup`` message; apply the resource
limits; drop to the throwaway user the host chose (when the host is root, which also makes
the process-count limit meaningful); install the audit hook (writes outside the working
directory, network, starting programs, ``ctypes`` and heap introspection are refused); move
the protocol onto private descriptors so that code printing to fd 1 cannot corrupt it; say
``ready``. Then: ``execute`` -> ``result`` (with ``llm_query``/``llm_batch``/``tool_call``
round trips in between), ``set_variable`` -> ``variable_set``, until stdin closes.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import linecache
import os
import resource
import signal
import stat
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

PROTOCOL_VERSION = 1
MAX_CALLBACK_BYTES = 8 * 1024 * 1024
"""Largest callback message (an llm_query prompt, a batch, tool arguments) sent to the host."""
_FILENAME = "<repl-{n}>"

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_EVENTS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    # event -> (indexes of the paths it changes, indexes of its dir_fd arguments)
    "os.remove": ((0,), (1,)),
    "os.rmdir": ((0,), (1,)),
    "os.mkdir": ((0,), (2,)),
    "os.chmod": ((0,), (2,)),
    "os.chown": ((0,), (3,)),
    "os.truncate": ((0,), ()),
    "os.utime": ((0,), (3,)),
    "os.chflags": ((0,), ()),
    "os.lchflags": ((0,), ()),
    "os.setxattr": ((0,), ()),
    "os.removexattr": ((0,), ()),
    "os.mkfifo": ((0,), (2,)),
    "os.mknod": ((0,), (3,)),
    "os.rename": ((0, 1), (2, 3)),
    "os.link": ((0, 1), (2, 3)),
    "os.symlink": ((1,), (2,)),
    "sqlite3.connect": ((0,), ()),
}
_NETWORK_EVENTS = {
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyname_ex",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
}
_PROGRAM_EVENTS = {
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.startfile",
    "subprocess.Popen",
    "os.forkpty",
    "pty.spawn",
}
_INTROSPECTION_EVENTS = {
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.addressof",
    "ctypes.call_function",
    "ctypes.cdata",
    "ctypes.string_at",
    "ctypes.wstring_at",
}
_BLOCKED_MODULES = {"ctypes", "_ctypes"}
_AF_UNIX = 1


class _FinalSignal(BaseException):
    """Raised by FINAL/FINAL_VAR to stop the rest of the code at once."""


class _CpuTimeExceeded(BaseException):
    """Raised by the CPU-time timer of one execution."""


class ReplCallbackError(RuntimeError):
    """A call back to the host (llm_query, llm_batch, tool_call) failed."""


def _clean(text: str) -> str:
    """Text that survives UTF-8 encoding (lone surrogates become escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class _Channel:
    """The JSON-lines protocol on two private descriptors."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        # owned for the life of the process: closed by abandon() or at exit
        self._reader = open(fd_in, "rb", buffering=1 << 16, closefd=True)  # noqa: SIM115
        self._fd_out = fd_out
        self.open = True

    def send(self, message: dict[str, Any]) -> None:
        if not self.open:
            raise ReplCallbackError("the host channel is not available in this process")
        data = (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(self._fd_out, view)
            view = view[written:]

    def receive(self) -> dict[str, Any] | None:
        if not self.open:
            return None
        line = self._reader.readline()
        if not line:
            return None
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError("protocol message is not an object")
        return message

    def abandon(self) -> None:
        """Forget the descriptors (in a forked child, so it cannot speak for the worker)."""
        self.open = False
        for fd in (self._reader.fileno(), self._fd_out):
            with contextlib.suppress(OSError):
                os.close(fd)


class _BoundedText(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self._parts: list[str] = []
        self._kept = 0
        self._limit = limit
        self.dropped = 0
        self.buffer = _BoundedBytes(self)

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase declares it writable; ours is fixed
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self._limit - self._kept
        if room > 0:
            piece = text[:room]
            self._parts.append(piece)
            self._kept += len(piece)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        return _clean("".join(self._parts))


class _BoundedBytes(io.RawIOBase):
    """``sys.stdout.buffer`` for the bounded stream: bytes decoded as UTF-8."""

    def __init__(self, text: _BoundedText) -> None:
        super().__init__()
        self._text = text

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._text.write(chunk.decode("utf-8", "replace"))
        return len(chunk)


def _apply_limits(setup: dict[str, Any]) -> None:
    """Resource limits, set while still privileged so that the code cannot raise them."""
    cpu = int(setup["session_cpu_seconds"])
    memory = int(setup["memory_bytes"])
    fsize = int(setup["file_size_bytes"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if setup.get("uid") is not None or setup.get("sandboxed"):
        # counted per user (in the sandbox: per user namespace), so meaningful only for
        # the sandbox's own user or the throwaway user of this session
        nproc = int(setup["max_processes"])
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    # a write past the file-size limit raises OSError instead of killing the interpreter
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _drop_privileges(setup: dict[str, Any]) -> None:
    uid = setup.get("uid")
    gid = setup.get("gid")
    if uid is None or gid is None:
        return
    os.setgroups([])
    os.setgid(int(gid))
    os.setuid(int(uid))
    if os.getuid() != int(uid) or os.geteuid() != int(uid):
        raise RuntimeError("could not drop privileges")


def _install_guard(workdir: str, *, allow_fork: bool, strict: bool) -> None:
    """The audit hook: refuses, inside this interpreter, what the code must not do.

    It is NOT a security boundary (PEP 578 says so): in the bubblewrap plans the operating
    system confines the code and this hook only adds clearer errors and a second layer;
    alone (``strict``, the unsafe opt-out plan) it is all there is.

    It never runs code the untrusted program controls. It reads only arguments whose type
    is exactly ``str``, ``bytes`` or ``int`` (subclasses are read through the built-in
    types' own methods, never their overrides); everything it calls was bound here, at
    installation (C functions and methods of built-in types, which code cannot replace);
    its refusal messages contain no object of the code's. Its configuration lives only in
    this closure. The paths it checks are resolved here, component by component, with
    ``lstat``/``readlink``; ``dir_fd`` arguments through ``/proc/self/fd``. ``os.open``
    does not report its ``dir_fd``, so in ``strict`` mode a relative ``os.open`` for
    writing is refused, and so is a path object whose ``__fspath__`` the hook would have
    to call (pass ``str(path)``).
    """
    _type, _len, _repr, _sub = type, len, repr, issubclass
    _str, _bytes, _int, _tuple = str, bytes, int, tuple
    _str_copy = str.__str__  # exact-str copy of a str subclass, without its overrides
    _decode = bytes.decode
    _int_value = int.__index__
    _lstat, _readlink, _getcwd = os.lstat, os.readlink, os.getcwd
    _is_link, _is_dir = stat.S_ISLNK, stat.S_ISDIR
    _denied = PermissionError
    root = os.path.realpath(workdir)
    prefix = root.rstrip("/") + "/"
    write_flags = _WRITE_FLAGS
    path_events = dict(_PATH_EVENTS)
    network_events = frozenset(_NETWORK_EVENTS)
    program_events = frozenset(_PROGRAM_EVENTS)
    introspection_events = frozenset(_INTROSPECTION_EVENTS)
    blocked_modules = frozenset(_BLOCKED_MODULES)
    own_pid = os.getpid()
    unchecked = object()

    def text_of(path: Any) -> Any:
        """The path as an exact str, ``None`` for a descriptor, ``unchecked`` otherwise."""
        kind = _type(path)
        if kind is _str:
            return path
        if _sub(kind, _int):
            return None
        if _sub(kind, _str):
            return _str_copy(path)
        if _sub(kind, _bytes):
            return _decode(path, "utf-8", "surrogateescape")
        return unchecked

    def real_path(text: str, base: str) -> str | None:
        """Like ``os.path.realpath``, with no Python-level helper code could patch."""
        if not text.startswith("/"):
            text = base + "/" + text
        pending = text.split("/")
        pending.reverse()
        resolved: list[str] = []
        links = 0
        while pending:
            part = pending.pop()
            if part == "" or part == ".":
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = "/" + "/".join(resolved) + ("/" if resolved else "") + part
            try:
                mode = _lstat(candidate).st_mode
            except OSError:
                resolved.append(part)
                continue
            if not _is_link(mode):
                resolved.append(part)
                continue
            links += 1
            if links > 40:
                return None
            try:
                target = _readlink(candidate)
            except OSError:
                return None
            if target.startswith("/"):
                resolved = []
            more = target.split("/")
            more.reverse()
            pending.extend(more)
        return "/" + "/".join(resolved)

    def base_of(dir_fd: Any) -> str | None:
        if dir_fd is None:
            return _getcwd()
        if not _sub(_type(dir_fd), _int):
            return None
        number = _int_value(dir_fd)
        if number < 0:  # AT_FDCWD and friends
            return _getcwd()
        try:
            return _readlink("/proc/self/fd/" + _repr(number))
        except OSError:
            return None

    def is_inside(real: str) -> bool:
        return real == root or real.startswith(prefix) or real == "/dev/null"

    def check_path(path: Any, dir_fd: Any, what: str) -> None:
        text = text_of(path)
        if text is None:
            return
        if text is unchecked:
            if strict:
                raise _denied(f"{what}: only str and bytes paths can be checked here")
            return
        base = base_of(dir_fd)
        real = None if base is None else real_path(text, base)
        if real is None or not is_inside(real):
            shown = _repr(text)
            raise _denied(
                f"{what} on {shown} (outside the working directory) is not allowed in this REPL"
            )

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if _type(event) is not _str or _type(args) is not _tuple:
            return
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            writing = False
            if _type(mode) is _str:
                for letter in "wax+":
                    if letter in mode:
                        writing = True
            elif mode is not None:
                writing = True
            if _sub(_type(flags), _int) and _int_value(flags) & write_flags:
                writing = True
            if writing:
                text = text_of(path)
                if strict and mode is None and _type(text) is _str and not text.startswith("/"):
                    raise _denied(
                        "os.open with a relative path for writing is not allowed in this "
                        "REPL: its dir_fd cannot be checked; use an absolute path or open()"
                    )
                check_path(path, None, "writing")
                return
            text = text_of(path)
            if _type(text) is _str:
                real = real_path(text, _getcwd())
                if real is not None and not is_inside(real):
                    try:
                        directory = _is_dir(_lstat(real).st_mode)
                    except OSError:
                        directory = False
                    if directory:
                        # a directory descriptor would anchor dir_fd= writes; listing
                        # directories (os.listdir, os.scandir) still works
                        shown = _repr(text)
                        raise _denied(
                            f"opening the directory {shown} (outside the working directory) "
                            "is not allowed in this REPL"
                        )
            elif text is unchecked and strict:
                raise _denied("opening: only str and bytes paths can be checked here")
        elif event in path_events:
            paths, dir_fds = path_events[event]
            dir_fd = args[dir_fds[0]] if dir_fds and dir_fds[0] < _len(args) else None
            for index in paths:
                if index < _len(args):
                    check_path(args[index], dir_fd, event)
        elif event in network_events:
            raise _denied("network access is not allowed in this REPL")
        elif event == "socket.__new__":
            family: Any = args[1] if _len(args) > 1 else None
            if not _sub(_type(family), _int) or _int_value(family) != _AF_UNIX:
                raise _denied("network access is not allowed in this REPL")
        elif event in program_events:
            raise _denied("starting other programs is not allowed in this REPL")
        elif event == "os.fork":
            if not allow_fork:
                raise _denied("starting processes is not allowed in this REPL")
        elif event == "os.kill" or event == "os.killpg":
            target: Any = args[0] if args else None
            if not allow_fork and not (
                _sub(_type(target), _int) and _int_value(target) in (own_pid, 0)
            ):
                raise _denied("signalling other processes is not allowed in this REPL")
        elif event in introspection_events:
            raise _denied(event + " is not allowed in this REPL")
        elif event == "object.__setattr__":
            name = args[1] if _len(args) > 1 else None
            if _type(name) is _str and name == "__code__":
                raise _denied("replacing a function's code is not allowed in this REPL")
        elif event == "import":
            name = args[0] if args else None
            if _type(name) is not _str:
                raise _denied("importing by a name that is not a plain str is not allowed")
            if name in blocked_modules:
                raise _denied("importing " + name + " is not allowed in this REPL")

    sys.addaudithook(hook)


class _Session:
    """The state of one session: the namespace, the channel, the final-answer slot."""

    def __init__(self, channel: _Channel, setup: dict[str, Any]) -> None:
        self.channel = channel
        self.max_output = int(setup["max_output_chars"])
        self.cpu_seconds = float(setup["cpu_seconds"])
        self.allow_fork = bool(setup["allow_fork"])
        self.main_pid = os.getpid()
        self.forked = 0
        self.executions = 0
        self.callback_ids = 0
        self.final: str | None = None
        self.final_error: str | None = None
        self.namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self._install_functions()

    # -- functions the code sees ---------------------------------------------------------

    def _install_functions(self) -> None:
        session = self

        def llm_query(prompt: object) -> str:
            """Ask the sub-model one question; returns its answer as a string."""
            if not isinstance(prompt, str):
                raise TypeError(f"llm_query(prompt) needs a str, got {type(prompt).__name__}")
            value = session.call("llm_query", {"prompt": _clean(prompt)})
            return str(value)

        def llm_batch(prompts: object) -> list[str]:
            """Ask the sub-model several questions at once (answered concurrently), in order."""
            if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__iter__"):
                raise TypeError("llm_batch(prompts) needs a list of str")
            items = list(prompts)
            for item in items:
                if not isinstance(item, str):
                    raise TypeError(
                        f"llm_batch(prompts) needs a list of str, got an item of type "
                        f"{type(item).__name__}"
                    )
            value = session.call("llm_batch", {"prompts": [_clean(p) for p in items]})
            return [str(v) for v in value] if isinstance(value, list) else []

        def tool_call(name: object, arguments: object = None, /, **kwargs: Any) -> str:
            """Run one of the host's tools: tool_call("calculator", expression="2+2")."""
            if not isinstance(name, str):
                raise TypeError(f"tool_call(name, ...) needs a str name, got {type(name).__name__}")
            merged: dict[str, Any] = {}
            if arguments is not None:
                if not isinstance(arguments, dict):
                    raise TypeError("tool_call(name, arguments) needs a dict of arguments")
                merged.update(arguments)
            merged.update(kwargs)
            try:
                json.dumps(merged)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"tool_call arguments must be JSON values: {exc}") from None
            return str(session.call("tool_call", {"name": name, "arguments": merged}))

        def final(value: Any) -> NoReturn:
            """End the run with ``value`` as the answer (the rest of the code does not run)."""
            if session.final is None and session.final_error is None:
                session.final = _clean(value if isinstance(value, str) else str(value))
            raise _FinalSignal

        def final_var(name: object) -> NoReturn:
            """End the run with the value of the variable called ``name`` as the answer."""
            if session.final is None and session.final_error is None:
                key = name.strip().strip("'\"") if isinstance(name, str) else name
                if not isinstance(key, str) or key not in session.namespace:
                    session.final_error = (
                        f"FINAL_VAR: there is no variable named {name!r}; "
                        "assign it first, or call FINAL(value)"
                    )
                else:
                    found = session.namespace[key]
                    session.final = _clean(found if isinstance(found, str) else str(found))
            raise _FinalSignal

        self.namespace.update(
            llm_query=llm_query,
            llm_batch=llm_batch,
            tool_call=tool_call,
            FINAL=final,
            FINAL_VAR=final_var,
            ReplCallbackError=ReplCallbackError,
        )

    def call(self, kind: str, payload: dict[str, Any]) -> Any:
        """One round trip to the host; the code waits for the answer."""
        if os.getpid() != self.main_pid:
            raise ReplCallbackError(f"{kind} is not available in a forked process")
        self.callback_ids += 1
        message = {"type": kind, "id": self.callback_ids, **payload}
        size = len(json.dumps(message, ensure_ascii=False).encode("utf-8"))
        if size > MAX_CALLBACK_BYTES:
            raise ValueError(
                f"{kind} payload is too large ({size:,} bytes, at most {MAX_CALLBACK_BYTES:,}): "
                "send smaller pieces"
            )
        self.channel.send(message)
        reply = self.channel.receive()
        if reply is None:
            os._exit(0)
        if reply.get("type") != "callback_reply" or reply.get("id") != self.callback_ids:
            raise ReplCallbackError("the host answered out of turn")
        if not reply.get("ok"):
            raise ReplCallbackError(str(reply.get("error") or f"{kind} failed"))
        return reply.get("value")

    # -- execution -----------------------------------------------------------------------

    def execute(self, request_id: int, code: str) -> dict[str, Any]:
        self.executions += 1
        self.final = None
        self.final_error = None
        filename = _FILENAME.format(n=self.executions)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        stdout = _BoundedText(self.max_output)
        stderr = _BoundedText(self.max_output)
        value: str | None = None
        error: str | None = None
        error_kind: str | None = None
        details = ""
        saved = sys.stdout, sys.stderr
        started = time.perf_counter()
        sys.stdout, sys.stderr = stdout, stderr
        signal.setitimer(signal.ITIMER_PROF, self.cpu_seconds)
        try:
            try:
                tree = ast.parse(code, filename, "exec")
            except (SyntaxError, ValueError) as exc:
                error_kind = "syntax"
                error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            else:
                last: ast.Expression | None = None
                tail = tree.body[-1] if tree.body else None
                if isinstance(tail, ast.Expr):
                    tree.body.pop()
                    last = ast.Expression(tail.value)
                exec(compile(tree, filename, "exec"), self.namespace)
                if last is not None:
                    result = eval(compile(last, filename, "eval"), self.namespace)
                    if result is not None:
                        value = self._bounded_repr(result)
        except _FinalSignal:
            pass
        except _CpuTimeExceeded:
            error_kind = "cpu_limit"
            error = f"CPU time limit exceeded ({self.cpu_seconds:g} s of CPU in one execution)"
        except BaseException as exc:
            error_kind = "memory_limit" if isinstance(exc, MemoryError) else "exception"
            error, details = self._describe(exc)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            sys.stdout, sys.stderr = saved
        if os.getpid() != self.main_pid:
            os._exit(0)  # a process the code forked: it never reports
        if self.forked:
            self._reap_forked()
        final_error = self.pending_final_error()
        if final_error is not None:
            error_kind = "final_var_missing"
            error = final_error
        out, err = stdout.getvalue(), stderr.getvalue()
        truncated = bool(stdout.dropped or stderr.dropped)
        if stdout.dropped:
            out += f"\n... [output truncated: {stdout.dropped} more characters]"
        if stderr.dropped:
            err += f"\n... [output truncated: {stderr.dropped} more characters]"
        if value is not None and len(value) > self.max_output:
            truncated = True
            value = value[: self.max_output] + "\n... [value truncated]"
        return {
            "type": "result",
            "id": request_id,
            "stdout": out,
            "stderr": err,
            "value": value,
            "error": error,
            "error_kind": error_kind,
            "traceback": details[: self.max_output],
            "final": self.final,
            "truncated": truncated,
            "duration_seconds": time.perf_counter() - started,
        }

    def pending_final_error(self) -> str | None:
        """The FINAL_VAR error the code left (read after the code ran)."""
        return self.final_error

    def _bounded_repr(self, value: Any) -> str:
        try:
            return _clean(repr(value))
        except BaseException as exc:
            return f"<repr failed: {type(exc).__name__}: {exc}>"

    def _describe(self, exc: BaseException) -> tuple[str, str]:
        try:
            summary = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            frames = traceback.extract_tb(exc.__traceback__)
            # keep the code's own frames (and what it called), not this worker's
            kept = [f for f in frames if f.filename != __file__ or not f.filename]
            lines = ["Traceback (most recent call last):\n"]
            lines.extend(traceback.format_list(kept))
            lines.append(summary + "\n")
            return _clean(summary), _clean("".join(lines))
        except BaseException:
            return type(exc).__name__, ""

    def _reap_forked(self) -> None:
        """Kill what the code forked and left behind, then collect the zombies.

        Only used inside the sandbox's PID namespace, where ``kill(-1)`` reaches exactly
        the session's own processes (bubblewrap's init, process 1, re-parents and reaps
        the orphans).
        """
        self.forked = 0
        if not self.allow_fork:
            return
        me = str(os.getpid())
        for _ in range(10_000):
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)  # every process in the namespace but us and init
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            # done when this namespace's /proc shows nothing but init and us (orphans are
            # reaped by init, so they may linger a moment)
            others = [n for n in os.listdir("/proc") if n.isdigit() and n not in ("1", me)]
            if not others:
                return
            time.sleep(0.001)

    def after_fork_in_child(self) -> None:
        self.channel.abandon()

    def after_fork_in_parent(self) -> None:
        self.forked += 1

    def set_variable(self, request_id: int, name: str, value: str) -> dict[str, Any]:
        if not name.isidentifier():
            return {"type": "variable_set", "id": request_id, "ok": False, "error": "bad name"}
        self.namespace[name] = value
        return {"type": "variable_set", "id": request_id, "ok": True, "error": None}


def _on_cpu_timer(signum: int, frame: object) -> None:
    raise _CpuTimeExceeded


def _take_protocol_fds() -> tuple[int, int]:
    """Move the protocol off fds 0/1 so that code writing to fd 1 cannot corrupt it."""
    fd_in = os.dup(0)
    fd_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    return fd_in, fd_out


def main() -> None:
    fd_in, fd_out = _take_protocol_fds()
    channel = _Channel(fd_in, fd_out)
    setup = channel.receive()
    if setup is None or setup.get("type") != "setup":
        sys.stderr.write("repl worker: expected a setup message\n")
        raise SystemExit(2)
    if int(setup.get("protocol_version", 0)) != PROTOCOL_VERSION:
        sys.stderr.write("repl worker: protocol version mismatch\n")
        raise SystemExit(2)
    workdir = str(setup["workdir"])
    _apply_limits(setup)
    _drop_privileges(setup)
    os.chdir(workdir)
    os.umask(0o077)
    signal.signal(signal.SIGPROF, _on_cpu_timer)
    session = _Session(channel, setup)
    os.register_at_fork(
        after_in_child=session.after_fork_in_child,
        after_in_parent=session.after_fork_in_parent,
    )
    _install_guard(workdir, allow_fork=session.allow_fork, strict=not setup.get("sandboxed"))
    channel.send(
        {
            "type": "ready",
            "protocol_version": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
        }
    )
    handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "execute": lambda m: session.execute(int(m["id"]), str(m["code"])),
        "set_variable": lambda m: session.set_variable(
            int(m["id"]), str(m["name"]), str(m["value"])
        ),
    }
    while True:
        message = channel.receive()
        if message is None:
            break
        handler = handlers.get(str(message.get("type")))
        if handler is None:
            sys.stderr.write(f"repl worker: unexpected message {message.get('type')!r}\n")
            continue
        channel.send(handler(message))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
