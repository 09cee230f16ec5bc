"""A stand-in for an agent's terminal UI, run in a tmux pane: it shows what the test writes to a
screen file (a prompt, a permission dialog, a running turn) and records, byte for byte, what is
typed into it (raw mode: Enter arrives as CR).

    python agent_tui.py SCREEN_FILE RECORD_FILE
"""

from __future__ import annotations

import os
import select
import sys
import termios
import tty


def main(screen_path: str, record_path: str) -> None:
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    shown: bytes | None = None
    try:
        with open(record_path, "ab", buffering=0) as record:
            while True:
                ready, _, _ = select.select([fd], [], [], 0.02)
                if ready:
                    data = os.read(fd, 65536)
                    if not data:
                        return
                    record.write(data)
                try:
                    with open(screen_path, "rb") as f:
                        screen = f.read()
                except OSError:
                    continue
                if screen != shown:
                    shown = screen
                    # Clear, home, then the screen's lines (CRLF: the terminal is raw).
                    sys.stdout.buffer.write(b"\x1b[2J\x1b[H" + screen.replace(b"\n", b"\r\n"))
                    sys.stdout.buffer.flush()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
