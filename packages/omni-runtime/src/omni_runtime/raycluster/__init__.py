"""The Ray backend: one Ray actor per process instance, placed from ``processes.<P>.ray``.

* :mod:`.placement` - what each instance asks Ray for, the logical GPU map (pure; no ``ray`` import).
* :mod:`.launcher` - create, watch and stop the actors (the spawn launcher's counterpart).
* :mod:`.actor` - the actor: runs the same worker code as a spawned process.
* :mod:`.dataplane` - a process's plane on a cluster: IPC + shared memory on its node, TCP across.
* :mod:`.backend` - the parent's side: launcher, plane and the peer book together.
* :mod:`.report` - ``omni topology --backend ray``.
* :mod:`.local` - a real multi-node Ray cluster on 127.0.0.1 (tests, benchmarks, trying it out).

Only :mod:`.launcher`, :mod:`.actor`, :mod:`.report` and :mod:`.local` import ``ray``
(``pip install 'omni-runtime[ray]'``), and only when a run uses the Ray backend.
"""
