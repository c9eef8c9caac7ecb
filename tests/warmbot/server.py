"""The warm `bot`: a process that has imported the whole package once and forks a `bot` command
for each launcher that connects (`python -m tests.warmbot.server SOCKET`; a leading "@" in SOCKET
names an abstract socket).

Starting an interpreter and importing the model SDK costs seconds of CPU per `bot` subprocess;
forking a process that has done it already costs milliseconds. Each command runs in a fresh
fork with the launcher's arguments, environment, working folder and standard streams (received
as file descriptors), so it is the real `bot.cli.main` in a process of its own, exactly as the
`bot` console script runs it. Forking is safe here because this process never starts an event
loop or a thread. The MCP notes server of the tests (tests/mcp_servers/notes.py, the official
SDK's server over stdio or HTTP) is served the same way (program `notes`): an MCP client starts
it as its own process, on its own pipes, without the half second of importing the SDK; so are the
hostile servers (tests/mcp_servers/hostile.py, program `hostile`).

Per connection the server forks a monitor, which forks the command, tells the launcher its pid,
and reports how it ended (`exit N` or `signal N`). When the launcher goes away (killed), the
monitor kills the command, so nothing outlives its test.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import pkgutil
import select
import signal
import socket
import sys
import threading
import time
from typing import Any

MAX_REQUEST = 1 << 20  # arguments and environment of one command, as JSON


def _warm_up() -> None:
    """Import every module a `bot` command might, and build the token encoding and the TLS client
    context (each cached per process, built by every command that assembles a prompt or starts
    an App), so each fork starts with them."""
    import anthropic  # noqa: F401
    import slack_bolt.async_app  # noqa: F401
    import telegram.ext  # noqa: F401

    import bot
    import channels

    for package in (bot, channels):
        for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not found.name.endswith(".__main__"):  # that one runs a command
                importlib.import_module(found.name)

    from bot.prompt.tokens import TokenCounter

    TokenCounter()

    from bot.cli.compose import client_tls

    client_tls()

    # Out of the garbage collector's view: each command's full collections would scan all of it
    # (and, by touching every object, copy the pages the fork shares with this process).
    gc.collect()
    gc.freeze()

    import tests.mcp_servers.hostile
    import tests.mcp_servers.notes  # noqa: F401


def _reopen_stdio() -> None:
    """Standard streams on the received descriptors, buffered the way the interpreter would
    have set them up for them (line-buffered on a terminal)."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    sys.stdin = open(0, encoding=encoding, errors=errors, closefd=False)  # noqa: SIM115
    line = 1 if os.isatty(1) else -1
    sys.stdout = open(1, "w", line, encoding, errors, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", 1, encoding, "backslashreplace", closefd=False)  # noqa: SIM115
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _finish(code: int) -> None:
    """End the command the way the interpreter ends: threads joined, exit hooks run, streams
    flushed, then the exit status."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _command(request: dict[str, Any], fds: list[int]) -> None:
    """In the command's own process: take over the streams, environment and folder, run."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    _reopen_stdio()
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    os.chdir(request["cwd"])
    try:
        code = PROGRAMS[request["program"]](request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        # As the interpreter does for an unhandled Ctrl-C: the traceback, then death by SIGINT.
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
        threading._shutdown()  # type: ignore[attr-defined]
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:
        sys.excepthook(*sys.exc_info())  # type: ignore[arg-type]
        code = 1
    _finish(code)


def _bot(argv: list[str]) -> int:
    sys.argv = ["bot", *argv]
    from bot.cli import main

    return main(argv)


def _notes(argv: list[str]) -> int:
    from tests.mcp_servers import notes

    sys.argv = [notes.__file__, *argv]
    notes.main(argv)
    return 0


def _hostile(argv: list[str]) -> int:
    from tests.mcp_servers import hostile

    sys.argv = [hostile.__file__, *argv]
    hostile.main(argv)
    return 0


PROGRAMS = {"bot": _bot, "notes": _notes, "hostile": _hostile}


def _monitor(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the monitor: start the command, report its pid and then how it ended."""
    pid = os.fork()
    if pid == 0:
        try:
            conn.close()
            _command(request, fds)
        finally:
            os._exit(1)  # never back into the monitor's code
    for fd in fds:
        os.close(fd)
    conn.sendall(f"pid {pid}\n".encode())
    exited = os.pidfd_open(pid)
    while True:
        ready, _, _ = select.select([conn, exited], [], [])
        if exited in ready:
            break
        if not conn.recv(64):  # the launcher is gone: so is its command
            os.kill(pid, signal.SIGKILL)
            break
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        outcome = f"signal {os.WTERMSIG(status)}"
    else:
        outcome = f"exit {os.waitstatus_to_exitcode(status)}"
    with contextlib.suppress(OSError):
        conn.sendall(f"{outcome}\n".encode())
    os._exit(0)


def _reap() -> None:
    """Collect ended monitors (so their commands' CPU time counts towards the test session's)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def serve(path: str) -> None:
    _warm_up()
    assert threading.active_count() == 1, "a thread before fork: the forks would be unsafe"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind("\0" + path[1:] if path.startswith("@") else path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [], 1.0)
        _reap()
        if sys.stdin in ready:
            return  # the test session ended (our stdin closed)
        if not ready:
            continue
        conn, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
        if os.fork() == 0:
            try:
                listener.close()
                _monitor(conn, json.loads(message), fds)
            finally:
                os._exit(1)  # never back into the server's loop
        conn.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    serve(sys.argv[1])
