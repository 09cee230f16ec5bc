"""The agents' side of the gateway: what their hooks report (`hooks`), a turn's reply mirrored
to the chat that asked (`mirror`), a dialog no hook reported told to the human (`dialogs`),
hosts whose worker is down (`hosts`), and what the other rooms share of an agent: its hourly
budget (`budget`) and the deployment's own notices to the human about it (`notices`)."""
