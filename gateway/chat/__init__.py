"""Chat in the gateway: a human's message from a provider to a mailbox (`inbox`), the allowlist
and pairing (`senders`), what strangers may cost (`strangers`), voice notes heard (`voice_notes`)."""
