"""Approvals, whatever the surface: the socket methods that open, wait for and decide them
(`methods`), what the waiting hook is told (`decision`), what a request shows (`asks`, `words`),
its posts in the chats and answers from them (`chat_posts`, `chat_answers`), the phone's part
(`phone`) and `trace K7QF` (`trace`)."""
