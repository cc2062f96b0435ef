"""FAKE DRA kubelet plugin with scripted wire answers, to test the kubelet side (``sriov_dra_lab``).

This is a test fake, not our plugin: it serves the registration service and the v1/v1beta1
DRAPlugin services on ONE unix socket (so ``PluginInfo.endpoint`` may be left empty) and answers
exactly what the test scripted, including answers the real plugin must never give (unknown
claim UIDs, skipped claims, gRPC errors, unsupported version lists). It records every
registration status and request it receives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from sriov_dra.kubeletapi import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    endpoints,
    pluginregistration_v1_pb2,
    pluginregistration_v1_pb2_grpc,
)

PrepareScript = Callable[[Any], Any]


@dataclass
class ScriptedPlugin:
    """FAKE plugin. ``prepare``/``unprepare`` map a request message to a response message (or
    raise via ``grpc.StatusCode`` by returning a ``grpc.StatusCode``)."""

    name: str = "scripted.example.com"
    plugin_type: str = endpoints.PLUGIN_TYPE_DRA
    endpoint: str = ""
    supported_versions: tuple[str, ...] = endpoints.DRA_SUPPORTED_VERSIONS
    prepare: PrepareScript | None = None
    unprepare: PrepareScript | None = None
    statuses: list[tuple[bool, str]] = field(default_factory=list)
    requests: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    """(full request message name, claim UIDs) per DRA call, which shows the version used."""

    # pluginregistration.Registration
    def GetInfo(self, request: Any, context: Any) -> pluginregistration_v1_pb2.PluginInfo:
        return pluginregistration_v1_pb2.PluginInfo(
            type=self.plugin_type,
            name=self.name,
            endpoint=self.endpoint,
            supported_versions=self.supported_versions,
        )

    def NotifyRegistrationStatus(
        self, request: Any, context: Any
    ) -> pluginregistration_v1_pb2.RegistrationStatusResponse:
        self.statuses.append((request.plugin_registered, request.error))
        return pluginregistration_v1_pb2.RegistrationStatusResponse()

    # DRAPlugin (v1 and v1beta1 share these; the request type tells the version)
    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        self.requests.append((request.DESCRIPTOR.full_name, tuple(c.uid for c in request.claims)))
        return self._answer(self.prepare, request, context, prepare=True)

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        self.requests.append((request.DESCRIPTOR.full_name, tuple(c.uid for c in request.claims)))
        return self._answer(self.unprepare, request, context, prepare=False)

    def _answer(self, script: PrepareScript | None, request: Any, context: Any, *, prepare: bool) -> Any:
        v1 = isinstance(
            request, dra_v1_pb2.NodePrepareResourcesRequest | dra_v1_pb2.NodeUnprepareResourcesRequest
        )
        if script is not None:
            answer = script(request)
            if isinstance(answer, grpc.StatusCode):
                context.abort(answer, "scripted failure")
            return answer
        pkg = dra_v1_pb2 if v1 else dra_v1beta1_pb2
        response = pkg.NodePrepareResourcesResponse() if prepare else pkg.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            response.claims[claim.uid].error = ""
        return response


@contextmanager
def serve_scripted(plugin: ScriptedPlugin, socket_path: Path) -> Iterator[ScriptedPlugin]:
    """Serve ``plugin`` on ``socket_path`` until the block ends, then stop and remove the socket."""
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    executor = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="fake-plugin")
    server = grpc.server(executor)
    pluginregistration_v1_pb2_grpc.add_RegistrationServicer_to_server(plugin, server)
    dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(plugin, server)
    dra_v1beta1_pb2_grpc.add_DRAPluginServicer_to_server(plugin, server)
    server.add_insecure_port(endpoints.grpc_target(socket_path))
    server.start()
    try:
        yield plugin
    finally:
        server.stop(0).wait()
        executor.shutdown(wait=True)
        socket_path.unlink(missing_ok=True)
