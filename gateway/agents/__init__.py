"""The agents' side of the gateway: what their hooks report (`hooks`), a turn's reply mirrored
to the chat that asked (`mirror`), and hosts whose worker is down (`hosts`)."""
