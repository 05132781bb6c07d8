"""The ``alaya.v1`` message and service classes, generated from ``render.proto`` at import.

Why at import instead of committed ``render_pb2.py`` files: the shipped ``.proto`` is then the
only source of truth, and generated code can never drift from it or from the installed
protobuf runtime (generated files pin the protobuf version that made them). ``grpc_tools``
(grpcio-tools, a dependency) compiles it in memory through ``grpc.protos_and_services`` (a
fraction of a second, docs/serve.md), with no cache folder to keep writable or stale. The proto
is found through ``sys.path``, which always holds the folder above the ``alaya`` package.

``render_pb2`` holds the messages (``GBufferFrame``, ``RGBFrame``, ...), ``render_pb2_grpc``
the ``RendererStub`` / ``RendererServicer`` pair.
"""

from __future__ import annotations

import grpc

PROTO = "alaya/serve/render.proto"

render_pb2, render_pb2_grpc = grpc.protos_and_services(PROTO)

__all__ = ["PROTO", "render_pb2", "render_pb2_grpc"]
