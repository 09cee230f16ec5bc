"""Stand-ins for the gateway's chat inbox, for a provider's transport tested on its own."""

from __future__ import annotations

from agentcomms.transports import ButtonPress


class TakesNoPresses:
    """A sink for tests that send no button presses: one that arrives fails the test."""

    async def button(self, press: ButtonPress) -> str:
        raise AssertionError(f"no button press was expected, got {press!r}")

    def in_place(self, data: str) -> bool:
        raise AssertionError(f"no button press was expected, got one with {data!r}")
