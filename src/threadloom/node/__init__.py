"""The node (spec 12): what one process does to share a store with others.

A store several processes share (PostgreSQL) is run by nodes: each holds leases on the
threads it runs, beats its heartbeat, fences itself when it cannot, settles the runs of
dead nodes, and tells the other nodes what it wrote. This room holds all of it:

- ``cluster.py``: the ``Cluster`` protocol (the node's row, the lease reads, the
  notifications) and ``LocalCluster`` (one process: every running run is lost, no peers,
  no notifications); ``open_cluster`` picks the implementation for a store.
- ``pg.py``: ``PgCluster``, the implementation over a PostgreSQL store (its ``nodes`` row
  and LISTEN/NOTIFY connections).
- ``host.py``: ``NodeHost``, what the node asks of the engine that runs the threads, and
  ``Peers``, what the engine tells the other nodes through the relay.
- ``liveness.py``: the heartbeat, self-fencing and the sweeper.
- ``relay.py``: the notifications heard and sent (events, wake-ups, chunks, control).
- ``delivery.py``: each subscribed thread's events in ``seq`` order, whichever node wrote
  them.

The floors: ``node/`` sits above ``thread/`` and below ``engine/``; the engine implements
``NodeHost`` and never the other way round.
"""
