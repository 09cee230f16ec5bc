"""A shell rule of the never-list against a shell line, read as the shell reads it
(:mod:`agentcomms.agents.shell_commands`): the rule matches when any command the line runs does,
by its program's name, with the rule's options in any order and grouping, and the rest of its
pattern against the command's other words; each operand also as the real path it reaches from
every folder the line may run in. A line that cannot be read, or runs a script that cannot, is
refused: what cannot be checked is not allowed.

Standard library only (and tree-sitter, for the line), not even ``typing``: it runs inside the
agent's loop, before each call it may refuse.
"""

from __future__ import annotations

import os.path
import re

from agentcomms.agents.shell_commands import Command, commands, folders

# A program's long options that are one of its short ones, so `--recursive --force` is `-rf`;
# GNU programs also take any unambiguous beginning of a long option (`--rec`).
SAME_OPTIONS = {
    "rm": {"R": "r", "recursive": "r", "force": "f", "dir": "d"},
    "cp": {"R": "r", "recursive": "r", "force": "f", "archive": "a"},
    "mv": {"force": "f"},
    "ln": {"force": "f", "symbolic": "s"},
    "chmod": {"recursive": "R"},
    "chown": {"recursive": "R"},
    "chgrp": {"recursive": "R"},
    "git": {"force": "f"},
}


def shell_matches(pattern: str, line: str, start: str = "") -> bool:
    """Whether any command `line` runs, from the folder `start`, matches the rule's `pattern`;
    a line that cannot be read, or runs a script that cannot, does."""
    return shell_hit(pattern, line, start) is not None


# One hook checks one line against every rule: it is read once.
_READ: dict[tuple[str, str], list[Command] | None] = {}


def shell_hit(pattern: str, line: str, start: str = "") -> str | None:
    """Why the rule's `pattern` refuses `line` run from `start`, for a person; None when it
    does not."""
    if (line, start) not in _READ:
        _READ[line, start] = _read(line, start)
    found = _READ[line, start]
    if found is None:
        return "the line cannot be read as a shell line, and what cannot be checked is refused"
    wanted = _pattern_words(pattern)
    for command in found:
        if command.opaque:
            return "the line runs a script that cannot be read before it runs"
        if _command_matches(wanted, command):
            words = ["…" if w is None else w for w in command.words]
            return f"the line runs {' '.join(words)!r}"
    return None


def _read(line: str, start: str) -> list[Command] | None:
    """Every command `line` runs from `start`, each also with its operands as the paths they
    reach; None when it cannot be read."""
    found = commands(line)
    if found is None:
        return None
    places = [p for p in folders(line, start) if p and os.path.isabs(p)]
    return [seen for command in found for seen in _with_real_paths(command, places)]


def _with_real_paths(command: Command, places: list[str]) -> list[Command]:
    """`command` as written, and with its operands as the paths they reach from each folder
    the line may run in (``..`` resolved, then symbolic links too): ``rm -rf build`` in /srv
    is ``rm -rf /srv/build``."""
    seen = [command]
    program, args = command.words[:1], command.words[1:]
    given = program[0] if program else None
    if given is not None and "/" in given:
        # A program given by path is also the one its links reach (`./r` linked to rm).
        for place in places or [""]:
            real = os.path.realpath(os.path.join(place, given))
            if os.path.basename(real) != os.path.basename(given):
                seen.append(Command([real, *args]))
    for place in places or [""]:
        for resolve in (os.path.normpath, os.path.realpath):
            words = [
                a
                if a is None or a.startswith("-") or (not place and not os.path.isabs(a))
                else resolve(os.path.join(place, a))
                for a in args
            ]
            if words != args:
                seen.append(Command([*program, *words]))
    return seen


def _pattern_words(pattern: str) -> list[str]:
    """A rule's pattern as the words of a command, ``*`` among them; Claude Code's prefix form
    ``git push:*`` is ``git push *``."""
    import shlex

    prefix = pattern.endswith(":*")
    text = pattern[:-2] if prefix else pattern
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    # A command's `~` is the home folder by the time it runs; the rule's is too.
    words = [os.path.expanduser(w) if w.startswith("~") else w for w in words]
    return [*words, "*"] if prefix else words or ["*"]


def _command_matches(wanted: list[str], command: Command) -> bool:
    """Whether `command` is the program `wanted` names with at least its options, and its other
    words match the rest of `wanted`. A computed word may be any options and operands."""
    program = os.path.basename(wanted[0].rstrip("/")) or wanted[0]
    name = command.name
    # Case aside: a case-insensitive file system (macOS) runs RM as rm.
    if name is not None and not as_glob(program.lower()).fullmatch(name.lower()):
        return False
    args = command.words[1:]
    # A rule naming its program refuses it whatever the computed words turn out to be; a rule
    # for any program (`* *secret*`) goes by the words the line spells out.
    if None in args and "*" not in program:
        return True
    given = [a for a in args if a is not None]
    same = SAME_OPTIONS.get((name or program).lower(), {})
    short, long, operands = _options(wanted[1:], same)
    has_short, has_long, has_operands = _options(given, same)
    if not short <= has_short:
        return False
    for option in long:
        if option in same and same[option] in has_short:
            continue  # --force given as -f
        if option not in has_long and not any(option.startswith(g) for g in has_long):
            return False
    glob = _operands_glob(operands)
    return any(glob.fullmatch(" ".join(o)) for o in has_operands)


def _options(words: list[str], same: dict[str, str]) -> tuple[set[str], set[str], list[list[str]]]:
    """The short options (as their program's one letter for each), the long ones, and the
    operands: as given, and without each word that may be the value of the option before it."""
    short: set[str] = set()
    long: set[str] = set()
    operands: list[str] = []
    values: list[str] = []
    after_option = False
    for at, word in enumerate(words):
        if word == "--":
            rest = words[at + 1 :]
            operands += rest
            values += rest
            break
        if word.startswith("--") and len(word) > 2 and "*" not in word:
            option = word[2:].split("=", 1)[0]
            long.add(option)
            # A GNU program takes any beginning of its long option that names it alone.
            full = [o for o in same if len(o) > 1 and o.startswith(option)] or [option]
            short.update(same[o] for o in full if o in same)
            after_option = "=" not in word
        elif word.startswith("-") and len(word) > 1 and "*" not in word:
            short.update(same.get(letter, letter) for letter in word[1:])
            after_option = True
        else:
            operands.append(word)
            if not after_option:
                values.append(word)
            after_option = False
    return short, long, [operands, values]


def _operands_glob(words: list[list[str]]) -> re.Pattern[str]:
    """The rule's operands as a glob over a command's operands joined by spaces; a last ``*``
    may also stand for none."""
    wanted = words[0]
    if wanted and wanted[-1] == "*":
        head = " ".join(wanted[:-1])
        if not head:
            return re.compile(".*", re.DOTALL)
        return re.compile(as_glob(head).pattern + "(?: .*)?", re.DOTALL)
    return as_glob(" ".join(wanted))


def as_glob(pattern: str) -> re.Pattern[str]:
    # Claude Code's prefix form "npm run:*" is "npm run*".
    pattern = pattern[:-2] + "*" if pattern.endswith(":*") else pattern
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")), re.DOTALL)
