"""A command as tests start it: `python -I -S launch.py PROGRAM SOCKET ARGS...` asks the warm
server (tests/warmbot/server.py) listening on SOCKET (a leading "@" names an abstract socket) to
run PROGRAM (`bot`, or the MCP test server `notes`) with ARGS and this process's streams,
environment and working folder, passes on the signals it gets, and ends the way the command ended
(its exit status, or death by the same signal). Only the standard library, so it starts in
milliseconds.

With `WARMBOT_PID_FD=N` in its environment (an inherited pipe), it writes the command's pid there
(`N\n`) once the command started, so a test can signal the command itself, SIGKILL included; the
variable is not passed on to the command.
"""

import json
import os
import signal
import socket
import sys

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


def main() -> None:
    program, path, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    pending: list[int] = []
    command: list[int] = []

    def forward(number: int, frame: object) -> None:
        if command:
            os.kill(command[0], number)
        else:
            pending.append(number)

    for number in FORWARDED:
        signal.signal(number, forward)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect("\0" + path[1:] if path.startswith("@") else path)
    pid_fd = os.environ.pop("WARMBOT_PID_FD", None)
    request = {"program": program, "argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    lines = conn.makefile("r")
    command.append(int(lines.readline().split()[1]))
    if pid_fd is not None:
        os.write(int(pid_fd), f"{command[0]}\n".encode())
        os.close(int(pid_fd))
    for number in pending:
        os.kill(command[0], number)
    kind, _, value = lines.readline().partition(" ")
    if kind == "signal":
        number = int(value)
        if number != signal.SIGKILL:  # its handler cannot be set (nor caught): it kills as is
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(int(value) if kind == "exit" else 1)


if __name__ == "__main__":
    main()
