"""The agents' side of the gateway: what their hooks report (`hooks`), a turn's reply mirrored
to the chat that asked (`mirror`), a dialog no hook reported told to the human (`dialogs`),
and hosts whose worker is down (`hosts`)."""
