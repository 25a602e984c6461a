"""Turning traces on with OpenTelemetry's own environment variables (``bot.otel``)."""

from __future__ import annotations

import importlib.util

import pytest

from bot.otel import TracingConfigError, build, wanted_exporter


@pytest.mark.parametrize(("env", "exporter"), [
    ({}, None),
    ({"OTEL_TRACES_EXPORTER": "none"}, None),
    ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
    ({"OTEL_TRACES_EXPORTER": " OTLP "}, "otlp"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp"),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, None),
])
def test_the_environment_picks_the_exporter(env: dict[str, str], exporter: str | None) -> None:
    assert wanted_exporter(env) == exporter


def test_an_unknown_exporter_names_the_variable_and_the_fix() -> None:
    with pytest.raises(TracingConfigError, match=r"OTEL_TRACES_EXPORTER=jaeger.*otlp, "
                                                 r"console, none"):
        wanted_exporter({"OTEL_TRACES_EXPORTER": "jaeger"})
    with pytest.raises(TracingConfigError, match="name one exporter"):
        wanted_exporter({"OTEL_TRACES_EXPORTER": "otlp,console"})
    with pytest.raises(TracingConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL=thrift"):
        build({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"})


def test_console_builds_a_provider_named_after_the_service() -> None:
    provider = build({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "askhuman-eu"})
    try:
        assert provider.resource.attributes["service.name"] == "askhuman-eu"
    finally:
        provider.shutdown()
    assert build({}) is None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(_installed("opentelemetry.exporter.otlp.proto.http"),
                    reason="the OTLP exporter is installed here")
def test_otlp_without_its_exporter_package_says_what_to_install() -> None:
    with pytest.raises(TracingConfigError, match=r"opentelemetry-exporter-otlp-proto-http: "
                                                 r"pip install 'askhuman\[otel\]'"):
        build({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})


def test_serve_refuses_to_start_with_an_exporter_it_cannot_use() -> None:
    from typer.testing import CliRunner

    from bot.cli import app

    result = CliRunner().invoke(app, ["serve"], env={"OTEL_TRACES_EXPORTER": "jaeger"})
    assert result.exit_code == 2
    assert "OTEL_TRACES_EXPORTER=jaeger" in result.output
    assert "otlp, console, none" in result.output


def test_a_forking_parent_checks_the_tracing_config_and_builds_nothing() -> None:
    """``serve --workers N`` checks in the parent (``otel.check``); each worker builds its
    own provider after the fork, since the batch processor's thread must not cross it."""
    import threading

    from opentelemetry import trace
    from typer.testing import CliRunner

    from bot.cli import app
    from bot.otel import check

    with pytest.raises(TracingConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL=thrift"):
        check({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"})
    threads, provider = threading.active_count(), trace.get_tracer_provider()
    check({"OTEL_TRACES_EXPORTER": "console"})
    assert threading.active_count() == threads and trace.get_tracer_provider() is provider
    result = CliRunner().invoke(app, ["serve", "--workers", "2"],
                                env={"OTEL_TRACES_EXPORTER": "jaeger"})
    assert result.exit_code == 2 and "OTEL_TRACES_EXPORTER=jaeger" in result.output
