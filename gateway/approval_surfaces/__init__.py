"""An approval in the agent's chats, surface by surface: the words people read and answer with
(`words`), who may answer and how an answer from a chat is taken (`answers`). Posting the
request and telling each chat how it was decided is :mod:`gateway.approval_chats`."""
