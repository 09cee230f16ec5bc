"""The gateway's socket: the server and its protocol (`server`, `protocol`), who is at the other
end of a connection (`caller`, `panes`), each method's declaration (its params, its result and who
may call it: `declare`, `params`, `results`), what a request acting for an agent may ask
(`confine`), and the table that serves only what is declared (`table`)."""
