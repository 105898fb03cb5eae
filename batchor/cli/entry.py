"""The `batchor` script's entry point: it loads the command line, and turns a Ctrl+C during that
load (the first few tenths of a second, before any command runs) into the one word and exit code
a Ctrl+C gets later, not a traceback."""

from __future__ import annotations

import os
import sys

EXIT_INTERRUPTED = 130  # errors.EXIT_INTERRUPTED: not imported, the import may be what was interrupted


def main() -> None:
    try:
        from batchor.cli.main import main as run_command
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)  # nothing was started: no state, no output
    run_command()


if __name__ == "__main__":
    main()
