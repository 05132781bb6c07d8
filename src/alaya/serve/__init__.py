"""Serving render sessions to other programs.

``grpc_server``: ``alaya serve --grpc PORT``, a bidirectional stream for game engines
(G-buffer frames in, RGB frames out; docs/serve.md). ``grpc_client``: the engine side in
Python. Nothing is imported here, so ``import alaya.serve`` needs no gRPC.

Servers only talk to runtime sessions (``alaya.runtime.SessionFactory``), never to models.
"""
