"""What a shell command line runs, read as the shell reads it: every simple command in it.

The never-list matches a rule against each command a line runs, not against its text
(:mod:`agentcomms.agents.never`). The line is parsed by tree-sitter's bash grammar, and every
simple command is found wherever it stands: in lists (``;``, ``&&``, ``||``, ``&``, new lines),
pipelines, subshells, groups, functions, loops, command and process substitutions, and in the
strings the shell runs again (``bash -c``, ``eval``, ``trap``, ``alias``, ``su -c``, ``env -S``,
a here-doc or here-string given to a shell, the words ``ssh``, ``watch`` or ``tmux`` run). A
command run through another (``sudo``, ``env``, ``nohup``, ``timeout 5``, ``xargs``,
``find -exec``, ``python -m``…) is also seen as itself. Words lose their quotes and
escapes as the shell's quote removal does (``'rm'``, ``r\\m``, ``$'\\x72m'`` are ``rm``); a word
the shell computes when it runs (``$X``, ``$(…)``, ``{a,b}``) is unknown (None), and may be
anything.

What cannot be parsed is not guessed at: :func:`commands` returns None, and a shell that runs
a script no one can read here (``curl … | sh``, ``eval "$X"``) is an opaque :class:`Command`,
which the never-list refuses under any rule of the shell's tool. Scripts run from a file
(``bash build.sh``) and other languages' own code (``python -c``) are not read.

Standard library and tree-sitter only, and not even ``typing``: the hook that asks runs before
each shell call of the agent.
"""

from __future__ import annotations

import os.path
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from tree_sitter import Node, Parser

# Deeper than this, strings run by strings run by… are refused rather than read.
MAX_DEPTH = 8
# A wrapper's command may begin at any of its words, each tried: one of more words than this is
# not read (and so refused).
MAX_WORDS = 256
# More folders than this a line may `cd` to are one no one can know.
MAX_FOLDERS = 32
# The shells: `-c STRING` runs the string; no script operand reads commands from standard input.
SHELLS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "rbash", "fish", "csh", "tcsh"}
)
# Programs that run the command their arguments name (after their own options and operands):
# each later word that is not an option may be where that command begins, so each is tried.
WRAPPERS = frozenset(
    {
        "sudo", "doas", "env", "command", "builtin", "exec", "nohup", "nice", "ionice", "time",
        "timeout", "gtimeout", "stdbuf", "setsid", "chroot", "unbuffer", "caffeinate", "flock",
        "taskset", "chrt", "strace", "ltrace", "busybox", "xargs", "parallel", "coproc",
        "runuser", "firejail", "systemd-run", "unshare", "nsenter", "torsocks", "proxychains",
        "proxychains4", "valgrind", "xvfb-run", "dbus-launch", "tini", "dumb-init", "watch",
        "catchsegv", "sg", "script", "su", "uv", "uvx", "pipx", "poetry", "pdm", "hatch",
        "pipenv", "rye", "conda", "mamba", "micromamba", "npx", "pnpx", "bunx", "direnv",
        "pkexec", "run0", "ssh", "toybox",
    }
)  # fmt: skip
# Programs whose arguments end where a command's own arguments come from standard input.
_FED = frozenset({"xargs", "parallel"})
# Programs that run a string as a shell line, given as the value of one of these options.
_STRING_OPTIONS = {
    "su": ("-c", "--command"),
    "runuser": ("-c", "--command"),
    "flock": ("-c", "--command"),
    "script": ("-c", "--command"),
    "env": ("-S", "--split-string"),
    "sg": ("-c",),
}
# The names of standard input, for a shell told to read its script from there.
_STDIN = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
# The home folder's expansions, known before the line runs (paths into it are matched whole).
_HOME = ("$HOME", "${HOME}")
# Programs that run their later words joined as a shell line (after options and operands).
_JOINING = frozenset({"ssh", "watch", "tmux", "screen"})
# Python, which runs a module's program with `-m MODULE` (`python3 -m agentcomms approve`).
_PYTHON = re.compile(r"python[0-9.]*")
# Programs that run their (joined) operands as a shell line.
_EVALUATING = frozenset({"eval"})
# The nodes that stand for words the shell computes only when it runs the line.
_COMPUTED = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
    }
)
_ANSI_C = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v",
}  # fmt: skip


class Command:
    """One simple command: its words after quote removal (None: a word computed as it runs).
    An opaque one runs a script that cannot be read here."""

    __slots__ = ("opaque", "words")

    def __init__(self, words: list[str | None], *, opaque: bool = False) -> None:
        self.words = words
        self.opaque = opaque

    @property
    def name(self) -> str | None:
        """The program's name as the rules name it: without its folder."""
        first = self.words[0] if self.words else None
        return None if first is None else os.path.basename(first.rstrip("/")) or first

    def __repr__(self) -> str:
        return f"Command({self.words!r}{', opaque=True' if self.opaque else ''})"


_parser: Parser | None = None


def _parse(text: str) -> Node | None:
    global _parser
    if _parser is None:
        from tree_sitter import Language, Parser

        _parser = Parser(Language(_bash_language()))
    root = _parser.parse(text.encode("utf-8", "surrogateescape")).root_node
    return None if root.has_error else root


def _bash_language() -> object:
    """The bash grammar, from tree-sitter-bash's compiled binding alone: its package's
    ``__init__`` loads importlib.resources for its queries (9 to 20 ms of every shell call's
    hook, measured), for nothing the never-list reads."""
    from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec, PathFinder

    package = PathFinder.find_spec("tree_sitter_bash")
    folders = package.submodule_search_locations if package is not None else None
    name = "tree_sitter_bash._binding"
    for folder in folders or ():
        for suffix in EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_binding" + suffix)
            if os.path.exists(path):
                loader = ExtensionFileLoader(name, path)
                binding = loader.create_module(ModuleSpec(name, loader, origin=path))
                loader.exec_module(binding)
                language: object = binding.language()
                return language
    from tree_sitter_bash import language as packaged  # laid out otherwise: the slow way

    return packaged()


def commands(line: str, depth: int = 0) -> list[Command] | None:
    """Every simple command `line` runs, each also as the command it runs (``sudo rm`` is also
    ``rm``); None when it is not a shell line the parser can read whole."""
    if depth > MAX_DEPTH:
        return None
    root = _parse(line)
    if root is None:
        return None
    found: list[Command] = []
    for node in _walk(root):
        if node.type == "command":
            words = _words(node)
            if words:
                found += _seen_as(Command(words), node, depth)
    return found


def folders(line: str, start: str) -> list[str | None]:
    """The folders `line` may run in: `start`, and each ``cd``/``pushd`` target as the path it
    names from the folders before it (None: one that cannot be known before it runs)."""
    seen: list[str | None] = [start]
    for command in commands(line) or []:
        if command.name not in ("cd", "pushd"):
            continue
        operands = [w for w in command.words[1:] if w is None or not w.startswith("-")]
        target = operands[0] if operands else os.path.expanduser("~")
        if target is None or target == "-":
            seen.append(None)
            continue
        target = os.path.expanduser(target)
        if os.path.isabs(target):
            reached = [os.path.normpath(target)]
        else:
            reached = [os.path.normpath(os.path.join(b, target)) for b in seen if b is not None]
        seen = list(dict.fromkeys([*seen, *reached]))
        if len(seen) > MAX_FOLDERS:  # a line of many cd's: somewhere no one can know
            return [*seen[:MAX_FOLDERS], None]
    return seen


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _words(command: Node) -> list[str | None]:
    """The command's name and arguments after quote removal, a word split by a line
    continuation (``-r\\<newline>f``) joined as the shell joins it."""
    parts = [
        child
        for i, child in enumerate(command.children)
        if command.field_name_for_child(i) in ("name", "argument")
    ]
    words: list[str | None] = []
    end = -1
    for part in parts:
        node = part.children[0] if part.type == "command_name" and part.children else part
        word = _word(node)
        if part.type == "command_name" and _globbed(node):
            word = None  # `/bin/r?` is whatever file the shell finds: any program
        source = _source(command)
        gap = source[end - command.start_byte : node.start_byte - command.start_byte]
        if words and end >= 0 and gap and re.fullmatch(rb"(?:\\\r?\n)+", gap):
            before = words[-1]
            words[-1] = None if before is None or word is None else before + word
        else:
            words.append(word)
        end = node.end_byte
    return words


def _globbed(node: Node) -> bool:
    """Whether a word has a pattern the shell expands to file names (unquoted ``*?[``)."""
    if node.type == "concatenation":
        return any(_globbed(child) for child in node.children)
    return node.type == "word" and re.search(rb"(?<!\\)[*?[]", _source(node)) is not None


def _source(node: Node) -> bytes:
    return node.text or b""


def _word(node: Node) -> str | None:
    """A word's value after quote removal; None when the shell computes it as it runs."""
    kind = node.type
    text = _source(node).decode("utf-8", "surrogateescape")
    if text in _HOME:
        return os.path.expanduser("~")  # the agent's own, which the line's shell has too
    if kind in _COMPUTED:
        return None
    if kind == "raw_string":
        return text[1:-1]
    if kind == "ansi_c_string":
        return _ANSI_C.sub(_ansi_c_escape, text[2:-1])
    if kind in ("string", "translated_string"):
        value = ""
        for child in node.children:
            if _source(child) in (b"$HOME", b"${HOME}"):
                value += os.path.expanduser("~")
            elif child.type in _COMPUTED:
                return None
            elif child.type == "string_content":
                piece = _source(child).decode("utf-8", "surrogateescape")
                value += re.sub(r"\\([$`\"\\])|\\\n", lambda m: m.group(1) or "", piece)
        return value
    if kind == "concatenation":
        pieces = [_word(child) for child in node.children]
        return None if None in pieces else "".join(p for p in pieces if p is not None)
    if kind in ("word", "number"):
        # Outside quotes a backslash keeps the next character as it is (a line continuation
        # goes), and a leading ~ is the home folder.
        value = re.sub(r"\\(\n|.)", lambda m: "" if m.group(1) == "\n" else m.group(1), text)
        return os.path.expanduser(value) if value.startswith("~") else value
    return None


def _ansi_c_escape(found: re.Match[str]) -> str:
    escape = found.group(1)
    head = escape[0]
    if head in "xuU" and len(escape) > 1:
        return chr(min(int(escape[1:], 16), 0x10FFFF))
    if head.isdigit():
        return chr(int(escape, 8) & 0xFF)
    if head == "c" and len(escape) == 2:
        return chr(ord(escape[1]) & 0x1F)
    return _ANSI_SIMPLE.get(escape, escape)


def _seen_as(command: Command, node: Node, depth: int, *, inner: bool = False) -> list[Command]:
    """`command`, and every command it runs in turn: the one a wrapper runs, the lines a shell
    or ``eval`` runs. `inner`: a command a wrapper runs, not the one `node` names (every later
    start is tried already, so a wrapper inside a wrapper is not unwrapped again)."""
    seen = [command]
    words = command.words
    name = command.name
    if name is None:
        # A computed program name that may also be several words: anything at all.
        return [Command(words, opaque=True)] if inner or _spreads(node) else seen
    name = name.lower()
    if name in SHELLS:
        seen += _shell_runs(words, node, depth)
    elif name in _EVALUATING:
        seen += _line_runs(_joined(words[1:]), depth)
    elif name == "trap" and len(words) > 2:
        seen += _line_runs(words[1], depth)
    elif name == "alias":
        # An agent's shell may expand aliases (Claude Code's keeps the user's): the line an
        # alias stands for runs wherever its name is used later.
        for word in words[1:]:
            if word is None or "=" in word:
                seen += _line_runs(None if word is None else word.split("=", 1)[1], depth)
    elif name in _JOINING:
        # Its command is later words joined, run by a shell (ssh's remote one, maybe this
        # host's; watch's `sh -c`; the keys tmux types into a pane): each start is tried.
        if len(words) > MAX_WORDS:
            return [Command(words, opaque=True)]
        for start in range(2, len(words)):
            before, word = words[start - 1], words[start]
            if before is not None and word is not None and not word.startswith("-"):
                seen += _line_runs(_joined(words[start:]), depth)
    elif name in (".", "source"):
        if len(words) < 2 or words[1] is None or words[1] in _STDIN:
            seen += _stdin_runs(node, depth)
    elif name == "find":
        seen += _find_runs(words, node, depth)
    elif _PYTHON.fullmatch(name):
        seen += _module_runs(words, node, depth)
    if name in _STRING_OPTIONS:
        seen += _option_string_runs(words, _STRING_OPTIONS[name], depth)
    if name in WRAPPERS and not inner:
        if len(words) > MAX_WORDS:  # each start is tried: a line this long is not read
            return [Command(words, opaque=True)]
        for start in range(1, len(words)):
            word = words[start]
            if word is not None and (word.startswith("-") or "=" in word):
                continue
            runs = words[start:] + ([None] if name in _FED else [])
            seen += _seen_as(Command(runs), node, depth, inner=True)
    return seen


def _spreads(node: Node) -> bool:
    """Whether the command's computed name may be several words (unquoted, or ``"$@"``)."""
    name = node.child_by_field_name("name")
    first = name.children[0] if name is not None and name.children else None
    if first is None:
        return True
    return first.type != "string" or b"@" in _source(first) or b"[*]" in _source(first)


def _joined(words: list[str | None]) -> str | None:
    if any(w is None for w in words):
        return None
    return " ".join(w for w in words if w is not None)


def _line_runs(line: str | None, depth: int) -> list[Command]:
    """The commands a string run as a shell line runs; opaque when it cannot be read."""
    if line is None:
        return [Command([None], opaque=True)]
    found = commands(line, depth + 1)
    return [Command([line], opaque=True)] if found is None else found


def _shell_runs(words: list[str | None], node: Node, depth: int) -> list[Command]:
    """What a shell runs: its ``-c`` string, or what it reads from standard input (a script
    file's contents are not read)."""
    given = iter(enumerate(words[1:], start=1))
    for at, word in given:
        if word is None:
            return [Command([None], opaque=True)]
        if word == "--":
            break
        if word.startswith(("-", "+")) and len(word) > 1:
            if word.startswith("--"):
                if word in ("--rcfile", "--init-file"):
                    next(given, None)
                continue
            if "c" in word[1:] and word[0] == "-":
                string = next(
                    (w for w in words[at + 1 :] if w is None or not w.startswith("-")), None
                )
                return _line_runs(string, depth)
            if word[1:] in ("o", "O") or word[-1] in "oO":
                next(given, None)  # an option's name follows
            if "s" in word[1:]:
                return _stdin_runs(node, depth)
            continue
        return [] if word not in _STDIN else _stdin_runs(node, depth)
    rest = words[words.index("--") + 1 :] if "--" in words else []
    if rest and rest[0] is not None and rest[0] not in _STDIN:
        return []  # a script file
    return _stdin_runs(node, depth)


def _stdin_runs(command: Node, depth: int) -> list[Command]:
    """What a command reading its script from standard input runs: the here-doc or
    here-string it is given, else (a pipe, a terminal) a script no one can read here."""
    redirects = list(command.children_by_field_name("redirect"))
    parent = command.parent
    if parent is not None and parent.type == "redirected_statement":
        redirects += parent.children_by_field_name("redirect")
    for redirect in redirects:
        if redirect.type == "herestring_redirect":
            value = next((_word(c) for c in redirect.children if c.type != "<<<"), None)
            return _line_runs(value, depth)
        if redirect.type == "heredoc_redirect":
            body = next((c for c in redirect.children if c.type == "heredoc_body"), None)
            text = _source(body).decode("utf-8", "surrogateescape") if body is not None else ""
            return _line_runs(text, depth)
        if redirect.type == "file_redirect" and _source(redirect).lstrip(b"0123456789")[:1] == b"<":
            given = redirect.children[-1] if redirect.children else None
            path = _word(given) if given is not None else None
            if path is None or path in _STDIN or path.startswith("/dev/fd/"):
                return [Command([None], opaque=True)]  # `sh < <(…)`: a script made as it runs
            return []  # a script file
    return [Command([None], opaque=True)]


def _module_runs(words: list[str | None], node: Node, depth: int) -> list[Command]:
    """The program ``python -m MODULE ARGS`` runs, seen as ``MODULE ARGS``."""
    for at, word in enumerate(words[1:], start=1):
        if word is None:
            return []
        if word == "-m" and at + 1 < len(words):
            return _seen_as(Command(words[at + 1 :]), node, depth, inner=True)
        if word.startswith("-m") and len(word) > 2:
            return _seen_as(Command([word[2:], *words[at + 1 :]]), node, depth, inner=True)
        if not word.startswith("-") or word == "-c":
            return []  # a script, or code: what it runs is not read
    return []


def _find_runs(words: list[str | None], node: Node, depth: int) -> list[Command]:
    """The commands ``find … -exec CMD … ;`` (``-execdir``, ``-ok``, ``-okdir``) runs."""
    found: list[Command] = []
    for at, word in enumerate(words):
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            inner: list[str | None] = []
            for later in words[at + 1 :]:
                if later in (";", "+"):
                    break
                inner.append(later)
            if inner:
                found += _seen_as(Command(inner), node, depth)
    return found


def _option_string_runs(
    words: list[str | None], options: tuple[str, ...], depth: int
) -> list[Command]:
    """The shell line a program runs from an option's value (``su -c LINE``)."""
    found: list[Command] = []
    following = [*words[1:], None]
    for at, word in enumerate(words[1:], start=1):
        if word is None:
            continue
        for option in options:
            if option.startswith("--"):
                if word == option:
                    found += _line_runs(following[at], depth)
                elif word.startswith(option + "="):
                    found += _line_runs(word.split("=", 1)[1], depth)
            elif word.startswith("-") and not word.startswith("--") and option[1] in word:
                # In a group of short options (`-qc`), the rest of the word is the value, or
                # the next word when the option ends it.
                value = word[word.index(option[1]) + 1 :]
                found += _line_runs(value or following[at], depth)
    return found
