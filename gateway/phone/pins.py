"""The PIN of a call coming in, checked across calls: each call gets one try, so a guesser simply
calls again; wrong PINs are therefore counted by the caller's number in the projection
(:meth:`agentcomms.store.Store.wrong_pin`, kept across a gateway restart). The
``voice.inbound.pin_tries``-th wrong PIN in a row locks the number out for
``voice.inbound.pin_lockout_s``: its calls are told so and hang up without a PIN prompt, even the
right PIN keyed on a call asked before the lockout began is refused, and the human is told in
their chats (someone who has their number is guessing their PIN). The right PIN clears the
count."""

from __future__ import annotations

import hmac
import logging
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from agentcomms.config import Config
from agentcomms.models import utcnow
from agentcomms.store import Store
from gateway.agents.notices import HumanNotices

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PinRefused:
    """Why a caller may not in (for the operator's record), and what they hear before goodbye."""

    why: str
    words: str = "Goodbye."


class PhonePins:
    def __init__(self, cfg: Config, store: Store, notices: HumanNotices) -> None:
        self._inbound = cfg.voice.inbound
        self._store = store
        self._notices = notices

    async def locked_out(self, number: str) -> PinRefused | None:
        """Why calls from `number` are refused before any PIN (None: ask for it)."""
        now = utcnow()
        until = await self._store.pin_locked_until(number, now)
        return None if until is None else _locked(until, now)

    async def check(self, number: str, heard: str) -> PinRefused | None:
        """The PIN keyed or said by `number` (its digits): None when it lets the caller in."""
        now = utcnow()
        until = await self._store.pin_locked_until(number, now)
        if until is not None:  # asked before the lockout began: no PIN is taken now
            return _locked(until, now)
        entered = "".join(re.findall(r"\d", heard)).encode()
        pin = self._inbound.pin
        if pin is not None and hmac.compare_digest(entered, pin.get_secret_value().encode()):
            await self._store.right_pin(number)
            return None
        lockout = timedelta(seconds=self._inbound.pin_lockout_s)
        wrong = await self._store.wrong_pin(
            number, now, tries=self._inbound.pin_tries, lockout=lockout
        )
        if wrong.locked_until is None:
            return PinRefused("a wrong PIN")
        if wrong.locked_now:
            await self._tell_human(number, wrong.failures, wrong.locked_until)
        locked = _locked(wrong.locked_until, now)
        return PinRefused(f"a wrong PIN; {locked.why}", locked.words)

    async def _tell_human(self, number: str, failures: int, until: datetime) -> None:
        text = (
            f"Phone: {failures} wrong PINs in a row from {number}, so calls from it are refused "
            f"until {until:%Y-%m-%d %H:%M} UTC. If that was not you, someone who knows your "
            "number is guessing your PIN: change voice.inbound.pin."
        )
        try:
            told = await self._notices.tell(text, kind="phone_locked_out")
        except Exception as exc:  # the lockout stands whatever the telling does
            log.warning("%s locked out, and the human could not be told: %s", number, exc)
            return
        log.warning("%s locked out of the phone menu until %s; told %s", number, until, told)


def _locked(until: datetime, now: datetime) -> PinRefused:
    minutes = max(1, math.ceil((until - now).total_seconds() / 60))
    words = (
        "Too many wrong PINs from this number. "
        f"Call again in {minutes} minute{'s' if minutes != 1 else ''}. Goodbye."
    )
    return PinRefused(f"locked out after wrong PINs until {until:%Y-%m-%d %H:%M:%S} UTC", words)
