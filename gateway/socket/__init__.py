"""The gateway's socket: who is at the other end of a connection, each method's declaration (its
params, its result and who may call it), and the table that serves only what is declared."""
