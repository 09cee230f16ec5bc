"""Text a person must judge, with nothing hidden: what an agent asks to run, shown as it will run.

An approval is a decision about a command. A terminal obeys escape sequences (retitling the
window, hiding what follows), a renderer reorders text around bidi controls ("Trojan Source",
CVE-2021-42574) and draws zero-width and tag characters as nothing, so a command shown as it was
sent may not be the command that runs. Deleting those characters is no better: the person then
approves a command that differs from the one that runs (``ls \\u202egnp.exe`` is not ``ls
gnp.exe``, and deleting an escape string with its contents hides the command inside it).

So :func:`visible` deletes nothing: every character a person could not see, or that a terminal
or renderer would act on, becomes a visible mark in the spelling a programmer reads, ``\\x1b``,
``\\u202e``, ``\\U000e0041``. Line feeds and tabs stay, as the layout a person reads; everything
else printable is kept exactly. Standard library only.
"""

from __future__ import annotations

# Marked: what Python calls unprintable (the "Other" and "Separator" categories: controls;
# format characters such as bidi controls, zero-width spaces and joiners, tags and the soft
# hyphen; surrogates, private-use and unassigned code points; line and paragraph separators;
# every space but U+0020, which looks like one and is not one to a shell), and these letters
# and marks, which draw as blank or change the glyph before them without showing.
_INVISIBLE = frozenset(
    {
        0x034F,  # combining grapheme joiner
        0x115F,  # Hangul choseong filler
        0x1160,  # Hangul jungseong filler
        0x17B4,  # Khmer vowel inherent aq
        0x17B5,  # Khmer vowel inherent aa
        0x180B,  # Mongolian free variation selectors
        0x180C,
        0x180D,
        0x180F,
        0x2800,  # braille pattern blank
        0x3164,  # Hangul filler
        0xFFA0,  # halfwidth Hangul filler
        *range(0xFE00, 0xFE10),  # variation selectors
        *range(0xE0100, 0xE01F0),  # variation selectors supplement
    }
)
# Kept as they are: the layout a person reads.
_KEPT = frozenset("\n\t ")
# Spelled as a programmer reads them; every other marked character by its code point.
_NAMED = {"\r": "\\r"}


def visible(text: str) -> str:
    """`text` with every character a person could not see, or that a terminal or a renderer
    would obey, shown as a mark (``\\x1b``, ``\\u202e``); nothing deleted or reordered."""
    return "".join(_mark(c) if _hidden(c) else c for c in text)


def _hidden(c: str) -> bool:
    return c not in _KEPT and (not c.isprintable() or ord(c) in _INVISIBLE)


def _mark(c: str) -> str:
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
