"""The agent's input box read from its screen, as Claude Code 2.1.328 draws it (screens captured
from the real one with `capture-pane -p -J`): the transcript repeats earlier prompts behind the
same marker, the box is the lowest one, between two rules."""

from __future__ import annotations

from agentcomms.bridge.look import at_prompt, draft_in_box, input_box
from agentcomms.bridge.prompt import holds

RULE = "\u2500" * 60
TYPED_NOT_SUBMITTED = "\n".join(
    [
        " \u2590\u259b\u2588\u2588\u2588\u259c\u258c   Claude Code v2.1.328",
        RULE,
        "\u276f\u00a0run the tests please",
        RULE,
        "  \u23f8 manual mode on \u00b7 ? for shortcuts",
    ]
)
SUBMITTED = "\n".join(
    [
        "\u276f run the tests please",
        "\u273b Connection refused \u00b7 retrying in 2s \u00b7 attempt 3/10",
        RULE,
        "\u276f\u00a0",
        RULE,
        "  \u23f8 manual mode on \u00b7 esc to interrupt",
    ]
)
PASTED = "\n".join([RULE, "\u276f\u00a0first line", "  second line", RULE, "  ? for shortcuts"])


def test_text_still_in_the_box_is_found() -> None:
    assert input_box(TYPED_NOT_SUBMITTED) == "run the tests please"
    assert holds(input_box(TYPED_NOT_SUBMITTED), "run the tests please")


def test_a_submitted_prompt_in_the_transcript_is_not_the_box() -> None:
    assert input_box(SUBMITTED) == ""
    assert not holds(input_box(SUBMITTED), "run the tests please")


def test_several_lines_in_the_box_are_read_together() -> None:
    assert input_box(PASTED) == "first line second line"
    assert holds(input_box(PASTED), "first line\nsecond line")


def test_a_shell_shows_no_agent_prompt() -> None:
    assert at_prompt(TYPED_NOT_SUBMITTED) and at_prompt(SUBMITTED)
    assert not at_prompt("root@host:~# \n$ ls\nREADME.md")


def test_a_draft_in_the_box_refuses_typing_and_an_empty_box_does_not() -> None:
    refused = draft_in_box(TYPED_NOT_SUBMITTED)
    assert refused is not None and refused.reason == "draft"
    assert draft_in_box(SUBMITTED) is None


# Gemini CLI 0.61.0 at its prompt, box empty (captured from the real one): its placeholder in the
# box, a blank line, then the footer, and no rule under the box.
GEMINI_EMPTY = "\n".join(
    [
        " > warm up",
        "",
        "\u2726 Warm.",
        RULE,
        " Shift+Tab to accept edits                                      1 MCP server",
        "",
        " >   Type your message or @path/to/file",
        "",
        " workspace (/directory)                  sandbox                /model",
        " /tmp/project                            no sandbox             Auto",
    ]
)


def test_gemini_clis_empty_box_holds_no_draft_and_a_typed_one_does() -> None:
    assert input_box(GEMINI_EMPTY) == ""
    assert draft_in_box(GEMINI_EMPTY) is None
    typed = GEMINI_EMPTY.replace("  Type your message or @path/to/file", "run the tests")
    assert input_box(typed) == "run the tests"
    assert draft_in_box(typed) is not None
