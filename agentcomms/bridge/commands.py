"""Spelling tmux commands: one invocation of several commands, and strings tmux parses.

tmux parses only one thing in an argument it is handed: a final ``;`` is a command separator. A
command *string* (if-shell's branches) is parsed whole, so every word in one must be checked
safe to parse first.
"""

from __future__ import annotations


def weight(commands: list[list[str]]) -> int:
    """About what the commands weigh in the message a tmux client sends its server."""
    return sum(len(arg.encode("utf-8")) + 1 for command in commands for arg in [*command, ";"])


def command_string(commands: list[list[str]]) -> str:
    """Commands as one string for tmux to parse (if-shell's branches). Every word must be
    checked to be safe to parse: this quotes, it does not escape."""
    return " ; ".join(
        " ".join(f"'{word}'" if " " in word else word for word in c) for c in commands
    )


def literal(text: str) -> str:
    """Spell `text` so tmux passes it through unchanged: a final ';' would end the command."""
    return text[:-1] + "\\;" if text.endswith(";") else text


def sequence(commands: list[list[str]]) -> list[str]:
    """Join commands into one invocation's arguments, separated by standalone ';'."""
    args: list[str] = []
    for command in commands:
        if args:
            args.append(";")
        args.extend(command)
    return args
