"""A command run for `kubectl exec` beside a container's process: the container's environment
and working dir, its own process group, stdout and stderr on pipes or one terminal (`-t`).

The session that owns it (the kubelet server) feeds stdin, forwards resizes and reads
`output()` until it ends; `kill()` takes the whole group down when the client goes away, so an
abandoned exec leaves no process behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import termios
from collections.abc import AsyncIterator, Callable

from components.kubelet import sandbox
from components.kubelet.channels import STDERR, STDOUT

CHUNK = 32 * 1024


class ExecStartError(Exception):
    """The command could not be started (not found, not executable, bad working dir)."""


def _terminal_in(join: Callable[[], None] | None) -> Callable[[], None]:
    def controlling_terminal() -> None:  # runs in the child, after fork
        if join is not None:
            join()
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return controlling_terminal


class ExecProcess:
    def __init__(self, process: asyncio.subprocess.Process, terminal: int | None) -> None:
        self.process = process
        self._terminal = terminal  # the pty's master side, when there is one

    @classmethod
    async def start(
        cls,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None,
        *,
        tty: bool,
        stdin: bool,
        pid: int = 0,
        executable: str = "",
    ) -> ExecProcess:
        """`pid`: the container's main process, whose namespaces the command enters (0: none);
        `executable`: the program that runs argv (argv[0] its name in the image), "" for argv[0]."""
        if not argv:
            raise ExecStartError("no command given")
        join = sandbox.join(pid, cwd) if pid else None
        master: int | None = None
        try:
            if tty:
                master, slave = os.openpty()
                try:
                    process = await asyncio.create_subprocess_exec(
                        *argv,
                        stdin=slave,
                        stdout=slave,
                        stderr=slave,
                        env=env,
                        cwd=cwd,
                        executable=executable or None,
                        preexec_fn=_terminal_in(join),
                    )
                finally:
                    os.close(slave)
                os.set_blocking(master, False)
            else:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    cwd=cwd,
                    executable=executable or None,
                    process_group=0,
                    preexec_fn=join,
                )
        except (OSError, subprocess.SubprocessError) as e:
            if master is not None:
                os.close(master)
            what = getattr(e, "strerror", None) or str(e)
            if isinstance(e, FileNotFoundError):
                what = "executable file not found"
            raise ExecStartError(f'exec: "{argv[0]}": {what}') from None
        return cls(process, master)

    async def write_stdin(self, data: bytes) -> None:
        if self._terminal is not None:
            await _write_all(self._terminal, data)
        elif self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.write(data)
            with contextlib.suppress(ConnectionError):
                await self.process.stdin.drain()

    async def close_stdin(self) -> None:
        if self._terminal is not None:
            with contextlib.suppress(OSError):
                await _write_all(self._terminal, b"\x04")  # a terminal's end of input: ^D
        elif self.process.stdin is not None:
            self.process.stdin.close()

    def resize(self, columns: int, rows: int) -> None:
        if self._terminal is not None:
            with contextlib.suppress(OSError):
                fcntl.ioctl(self._terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """(stream, bytes) as the command writes them, until both streams (or the terminal) end."""
        if self._terminal is not None:
            async for data in _read_terminal(self._terminal):
                yield STDOUT, data
            return
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(maxsize=4)

        async def pump(stream: int, reader: asyncio.StreamReader | None) -> None:
            while reader is not None and (data := await reader.read(CHUNK)):
                await queue.put((stream, data))
            await queue.put(None)

        pumps = [
            asyncio.create_task(pump(STDOUT, self.process.stdout)),
            asyncio.create_task(pump(STDERR, self.process.stderr)),
        ]
        try:
            ended = 0
            while ended < 2:
                item = await queue.get()
                if item is None:
                    ended += 1
                else:
                    yield item
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def wait(self) -> int:
        code = await self.process.wait()
        return 128 - code if code < 0 else code  # killed by a signal: 128 + its number

    def kill(self) -> None:
        """SIGKILL the command's whole group (it may have started children)."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    async def close(self) -> None:
        self.kill()
        with contextlib.suppress(ProcessLookupError):
            await self.process.wait()
        if self._terminal is not None:
            os.close(self._terminal)
            self._terminal = None


async def _write_all(fd: int, data: bytes) -> None:
    loop = asyncio.get_running_loop()
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            ready = loop.create_future()
            loop.add_writer(fd, ready.set_result, None)
            try:
                await ready
            finally:
                loop.remove_writer(fd)


async def _read_terminal(fd: int) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    while True:
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            await _readable(loop, fd)
            continue
        except OSError:  # EIO: every process holding the terminal's other side has exited
            return
        if not data:
            return
        yield data


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
