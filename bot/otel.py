"""Turning traces on: OpenTelemetry's own environment variables, read at ``serve``.

Tracing is off unless the environment asks for it, the way OpenTelemetry's SDKs are
configured everywhere:

- ``OTEL_TRACES_EXPORTER``: ``otlp`` or ``console`` turns it on (``none``: off);
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) alone
  turns it on with ``otlp``. ``OTEL_SDK_DISABLED=true`` turns it off whatever else.
- ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``_TRACES_`` too): ``http/protobuf`` (default) or
  ``grpc``; the exporters read their own ``OTEL_EXPORTER_OTLP_*`` settings (headers,
  timeout, certificates).
- ``OTEL_SERVICE_NAME`` (default ``askhuman``), ``OTEL_RESOURCE_ATTRIBUTES``,
  ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``: read by the SDK as usual.

A process already given an SDK ``TracerProvider`` (``opentelemetry-instrument``) keeps
it. The SDK is imported only when tracing is on: ``pip install 'askhuman[otel]'``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import Any

from bot.engine import tracing

log = logging.getLogger("askhuman.otel")
_owned: Any = None

EXPORTERS = ("otlp", "console", "none")
_OTLP = {"http/protobuf": ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                           "opentelemetry-exporter-otlp-proto-http"),
         "grpc": ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
                  "opentelemetry-exporter-otlp-proto-grpc")}


class TracingConfigError(Exception):
    """The OpenTelemetry environment asks for something this process cannot do."""


def wanted_exporter(env: Mapping[str, str]) -> str | None:
    """The exporter the environment asks for (None: tracing stays off)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")
             if n.strip()]
    if not names:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") \
            or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        return "otlp" if endpoint else None
    unknown = [n for n in names if n not in EXPORTERS]
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']}: askhuman exports traces "
            f"with {', '.join(EXPORTERS)}; set it to one of those (or unset it).")
    if len(names) > 1:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={env['OTEL_TRACES_EXPORTER']}: name one exporter "
            "(otlp, console or none); send to several through an OpenTelemetry Collector.")
    return None if names[0] == "none" else names[0]


def configure(env: Mapping[str, str]) -> Any:
    """Turn tracing on as ``env`` says; returns the provider it built (None: off, or
    a provider set up before us, which its owner flushes).

    Raises ``TracingConfigError`` naming the variable and the fix when the environment
    asks for traces this process cannot send (no SDK, no exporter package, an unknown
    exporter).
    """
    from opentelemetry import trace

    existing = trace.get_tracer_provider()
    if hasattr(existing, "add_span_processor"):  # an SDK provider set up before us
        tracing.use(existing)
        log.info("traces on", extra={"exporter": "the process's own TracerProvider"})
        return None
    provider = build(env)
    if provider is None:
        return None
    trace.set_tracer_provider(provider)  # an instrumented agent's spans go there too
    tracing.use(provider)
    global _owned
    _owned = provider
    log.info("traces on", extra={"exporter": wanted_exporter(env),
                                 "service": env.get("OTEL_SERVICE_NAME") or "askhuman"})
    return provider


def build(env: Mapping[str, str]) -> Any:
    """The SDK ``TracerProvider`` ``env`` asks for, with its exporter (None: tracing off).
    Sets nothing global (``configure`` does)."""
    exporter_name = wanted_exporter(env)
    if exporter_name is None:
        return None
    asked = _asked(env, exporter_name)
    _require_sdk(asked)
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    exporter = (ConsoleSpanExporter() if exporter_name == "console"
                else _otlp_class(env, asked)())
    service = env.get("OTEL_SERVICE_NAME") or "askhuman"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def check(env: Mapping[str, str]) -> None:
    """Raise what ``configure`` would raise, building nothing: a parent that forks
    workers checks here, and each worker builds its own provider (the batch
    processor's thread must not cross a fork)."""
    exporter_name = wanted_exporter(env)
    if exporter_name is None:
        return
    asked = _asked(env, exporter_name)
    _require_sdk(asked)
    if exporter_name == "otlp":
        _otlp_class(env, asked)


def _asked(env: Mapping[str, str], exporter_name: str) -> str:
    return (f"OTEL_TRACES_EXPORTER={exporter_name}" if env.get("OTEL_TRACES_EXPORTER")
            else "OTEL_EXPORTER_OTLP_ENDPOINT")


def _require_sdk(asked: str) -> None:
    try:
        importlib.import_module("opentelemetry.sdk.trace")
    except ImportError:
        raise TracingConfigError(
            f"{asked} asks for traces, but opentelemetry-sdk is not installed: "
            f"pip install 'askhuman[otel]' (or unset {asked.split('=')[0]}).") from None


def _otlp_class(env: Mapping[str, str], asked: str) -> Any:
    key = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" if env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
           else "OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = (env.get(key) or "http/protobuf").strip().lower()
    if protocol not in _OTLP:
        raise TracingConfigError(f"{key}={protocol}: askhuman sends OTLP over "
                                 "http/protobuf (the default) or grpc; set one of those.")
    module, package = _OTLP[protocol]
    try:
        return importlib.import_module(module).OTLPSpanExporter
    except ImportError:
        raise TracingConfigError(
            f"{asked} ({protocol}) needs {package}: pip install 'askhuman[otel]'"
            + (f" {package}" if protocol == "grpc" else "")
            + " (or set OTEL_TRACES_EXPORTER=console to print spans).") from None


def owned() -> Any:
    """The provider ``configure`` built (None: it built none)."""
    return _owned


async def shutdown() -> None:
    """Flush the spans still queued (a step of ``serve``'s stop), off the event loop."""
    import asyncio

    global _owned
    provider, _owned = _owned, None
    if provider is not None:
        await asyncio.to_thread(provider.shutdown)
