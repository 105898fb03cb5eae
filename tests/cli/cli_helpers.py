"""Helpers for driving the real `batchor` command line in a subprocess (exit codes, signals).

A plain module rather than a conftest.py: a second conftest.py would shadow the root one's
`from conftest import make_spec` for every folder collected after this one.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parents[2]


def cli_command(*args: Any) -> list[str]:
    return [sys.executable, "-m", "batchor.cli.main", *map(str, args)]


def cli_env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_cli(
    cwd: Path, *args: Any, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `batchor ARGS...` in `cwd` with stdin closed (so never on a TTY)."""
    return subprocess.run(
        cli_command(*args),
        cwd=cwd,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


class Background:
    """`batchor ARGS...` running in the background; output goes to files (a pipe could fill up
    and stall the child). Killed on exit from the `with` block if still running."""

    def __init__(self, cwd: Path, *args: Any, name: str = "bg", env: dict[str, str] | None = None) -> None:
        self.stdout_path, self.stderr_path = cwd / f"{name}.stdout", cwd / f"{name}.stderr"
        self._out = open(self.stdout_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in __exit__
        self._err = open(self.stderr_path, "w", encoding="utf-8")  # noqa: SIM115
        self.process = subprocess.Popen(
            cli_command(*args),
            cwd=cwd,
            env=env or cli_env(),
            stdout=self._out,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._out.close()
        self._err.close()

    def wait(self, timeout: float = 60) -> int:
        return self.process.wait(timeout=timeout)

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8")


def wait_until(condition: Callable[[], bool], *, timeout: float = 30, what: str = "condition") -> None:
    """Poll `condition` (no assertion on how long it takes, only that it happens at all)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def ndjson(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def as_foreground_job() -> None:
    """In the child: Ctrl+C's default action, as a shell gives its foreground job. A test run started
    in the background by a non-interactive shell (`cmd &`, nohup) inherits SIGINT ignored, and Python
    keeps an inherited ignore, so a signalled child would simply go on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _take_the_terminal() -> None:
    """In the child, after setsid: make stdin's pseudo-terminal the session's controlling terminal."""
    as_foreground_job()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """`batchor ARGS...` with stdin, stdout and stderr on one pseudo-terminal, which is its
    controlling terminal (its own session), as in a shell: Ctrl+C typed there sends SIGINT."""

    def __init__(self, cwd, *args) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            cli_command(*args),
            cwd=cwd,
            env=cli_env(TERM="dumb", COLUMNS="200"),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            start_new_session=True,
            preexec_fn=_take_the_terminal,
        )
        os.close(slave)
        self.screen = ""

    def read_until(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.screen and time.monotonic() < deadline:
            if not self._read(0.1) and self.process.poll() is not None:
                break
        return self.screen

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self._read(0.05):  # what it wrote just before exiting
            pass
        os.close(self.master)
        return self.process.wait(timeout=5)

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the child closed its side
            return False
        self.screen += chunk.decode(errors="replace")
        return bool(chunk)


def run_inprocess(
    monkeypatch: Any, capsys: Any, cwd: Path, *args: Any, env: dict[str, str | None] | None = None
) -> tuple[int, str, str]:
    """`batchor ARGS...` in this process through the real entry point (its error handler and exit
    codes): (exit code, stdout, stderr). Faster than a subprocess (no start-up imports), and as
    isolated as one: `cwd`, `env` changes (None removes), stdin on /dev/null, and what the command
    changes in the process (variables from a .env, its log handler, -q) last for this call only."""
    import pytest

    from batchor.cli.main import run

    capsys.readouterr()
    with monkeypatch.context() as scoped, open(os.devnull, encoding="utf-8") as devnull, _process_restored():
        scoped.chdir(cwd)
        scoped.setattr(sys, "stdin", devnull)
        for name, value in (env or {}).items():
            if value is None:
                scoped.delenv(name, raising=False)
            else:
                scoped.setenv(name, value)
        with pytest.raises(SystemExit) as exited:
            run([str(a) for a in args])
    out = capsys.readouterr()
    return int(exited.value.code or 0), out.out, out.err


def inprocess_cli(monkeypatch: Any, capsys: Any) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run_cli`'s shape (cwd, *args, env=changes) run in this process: for the `cli` fixtures."""

    def run(
        cwd: Path, *args: Any, env: dict[str, str | None] | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        code, out, err = run_inprocess(monkeypatch, capsys, cwd, *args, env=env)
        return subprocess.CompletedProcess(["batchor", *map(str, args)], code, out, err)

    return run


@contextmanager
def _process_restored() -> Iterator[None]:
    """Undo what one command run changes in the process: environment, the `batchor` logger, -q."""
    import logging

    from batchor.cli.basics import settings

    environ = dict(os.environ)
    logger = logging.getLogger("batchor")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    quiet = settings.quiet
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
        settings.quiet = quiet
