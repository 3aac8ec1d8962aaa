"""Services: one module per concern, the only place its SQL lives.

A service function takes `(conn, ctx, ...)`: a connection inside a transaction its
caller opened, and the subject's Context. It never commits, never opens a
transaction and never runs the model: app.usecases.memory.Memory owns the
transaction (a read snapshot, or the write lock) and embeds before it takes it.

The one exception is the embedding queue's batch loop (embedding.reindex and the
server's embed_worker that runs it): it is given the engine, not a connection,
because each batch must commit on its own (an interrupted reindex keeps what it
did) and the model runs between batches with no transaction open.
"""
