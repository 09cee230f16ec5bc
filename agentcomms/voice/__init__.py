"""Phone calls: speech providers (`tts/`, `stt/`), call systems (`callsystem/`) and the audio
files they share (`audio.py`). The call itself is `workflows/call/`."""
