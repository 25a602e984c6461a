"""The shipped Grafana dashboard and Prometheus alert rules use only metric names (with
the right ``_total`` / ``_bucket`` suffixes) and label names that ``/metrics`` really
exports, so neither silently shows "no data" after a rename."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bot import metrics
from bot.settings import Settings
from tests.api.conftest import running_door
from tests.fakes.feishu_api import FakeFeishuApi
from tests.fakes.slack_api import FakeSlackAPI
from tests.ops.conftest import fake_feishu, fake_slack, ops_config  # noqa: F401
from tests.ops.test_admin_cli import run_row, start, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset",
            "bool", "and", "or", "unless", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}")
_IDENT = re.compile(r"(?<![\w.$])([a-zA-Z_:][\w:]*)(\s*\()?")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
            "gauge": ("",), "summary": ("_count", "_sum", "")}


def metric_names(expr: str) -> set[str]:
    """Series names in a PromQL expression: identifiers that are not function calls,
    keywords, label names (in ``{}``/``by ()``), string contents or range durations."""
    bare = _STRING.sub('""', expr)
    bare = _GROUPING.sub(" ", bare)
    bare = re.sub(r"\{[^}]*\}", " ", bare)
    bare = re.sub(r"\[[^\]]*\]", " ", bare)
    return {m.group(1) for m in _IDENT.finditer(bare)
            if m.group(2) is None and m.group(1).lower() not in KEYWORDS}


def label_names(expr: str) -> dict[str, set[str]]:
    """Label names per series name from ``name{label="…"}`` matchers, and those of every
    ``by (…)`` grouping under the key ``""`` (they must exist on some series used)."""
    bare = _STRING.sub('""', expr)
    used: dict[str, set[str]] = {"": set()}
    for name, body in _SELECTOR.findall(bare):
        used.setdefault(name, set()).update(_MATCHER_LABEL.findall(body))
    for _, body in _GROUPING.findall(bare):
        used[""].update(x.strip() for x in body.split(",") if x.strip())
    return used


def dashboard_exprs() -> list[str]:
    board = json.loads((EXAMPLES / "grafana-dashboard.json").read_text())
    return [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]


def alert_exprs() -> list[str]:
    rules = yaml.safe_load((EXAMPLES / "prometheus-alerts.yml").read_text())
    return [str(rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


def test_the_extractor_finds_names_and_skips_functions_labels_and_strings() -> None:
    expr = ('histogram_quantile(0.95, sum by (le, route) (rate(askhuman_tme_to_decision_'
            'seconds_bucket{outcome!="timeout"}[6h]))) > 3600 and on() max(up) == bool 1')
    assert metric_names(expr) == {"askhuman_tme_to_decision_seconds_bucket", "up"}
    assert metric_names('sum(rate(x_total{a="b(c)"}[$__rate_interval])) / y') == \
        {"x_total", "y"}
    assert label_names(expr) == {"askhuman_tme_to_decision_seconds_bucket": {"outcome"},
                                 "": {"le", "route"}}


def test_the_alert_rules_are_complete() -> None:
    rules = yaml.safe_load((EXAMPLES / "prometheus-alerts.yml").read_text())
    for rule in [r for group in rules["groups"] for r in group["rules"]]:
        assert rule["alert"] and rule["expr"] and "for" in rule, rule
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule


def test_the_operations_page_explains_every_alert() -> None:
    page = (EXAMPLES.parent / "docs" / "operations.md").read_text()
    alerts = yaml.safe_load((EXAMPLES / "prometheus-alerts.yml").read_text())["groups"]
    for rule in [r for group in alerts for r in group["rules"]]:
        assert f"**{rule['alert']}** ({rule['labels']['severity']})" in page, rule["alert"]


def exported(text: str) -> dict[str, set[str]]:
    """Every series name ``/metrics`` exports (histogram/counter suffixes expanded from
    each family's type), with the label names the code declares for it."""
    declared = {m._name: set(m._labelnames) for m in metrics.PROCESS_METRICS}
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        labels = declared.get(family.name, set())
        for sample in family.samples:
            labels |= set(sample.labels)
        for suffix in SUFFIXES.get(family.type, ("",)):
            names[family.name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return names


def database_labels(door_database: object) -> dict[str, set[str]]:
    """Label names of the scrape-time families, even those with no sample yet."""
    collector = metrics.DatabaseCollector(door_database)  # type: ignore[arg-type]
    return {f.name + ("_total" if f.type == "counter" else ""): set(getattr(f, "_labelnames", ()))
            for f in collector.collect()}


async def test_every_name_the_dashboard_and_alerts_use_is_exported(
    fake_slack: FakeSlackAPI, fake_feishu: tuple[FakeFeishuApi, str],  # noqa: F811
    db_url: str,
) -> None:
    values = ops_config(db_url)
    values["metrics"] = {"enabled": True}
    async with running_door(fake_slack, fake_feishu, Settings.model_validate(values)) as ops:
        _, ts = await start(ops)
        waiting = (await ops.http.get(ops.url + "/metrics")).text
        await ops.approve_in_slack(ts)
        await wait_for(lambda: run_row(ops).status == "succeeded", "the run to finish")
        response = await ops.http.get(ops.url + "/metrics")
        assert response.status_code == 200
        names = exported(waiting)
        for name, labels in exported(response.text).items():
            names[name] = names.get(name, set()) | labels
        for name, labels in database_labels(ops.database).items():
            names[name] = names.get(name, set()) | labels
    assert "askhuman_decisions_total" in names and "askhuman_resume_failures" not in names
    for expr in dashboard_exprs() + alert_exprs():
        assert metric_names(expr), expr
        assert problems(expr, names) == [], expr
    # the check itself bites: a misspelled name, a missing suffix, a wrong label
    assert problems("sum(rate(askhuman_decision_total[5m]))", names)
    assert problems("rate(askhuman_time_to_decision_seconds[5m])", names)
    assert problems('max(askhuman_pending_requests{rout="ops"})', names)
    assert problems("sum by (agent) (askhuman_pending_requests)", names)


def problems(expr: str, names: dict[str, set[str]]) -> list[str]:
    """What in ``expr`` ``/metrics`` does not export: series names, then label names."""
    used = metric_names(expr)
    missing = [f"{name!r} is not exported" for name in sorted(used) if name not in names]
    if missing:
        return missing
    for name, labels in label_names(expr).items():
        known = names[name] if name else set().union(*(names[n] for n in used))
        missing += [f"{name or 'by ()'} has no label {x!r}" for x in sorted(labels - known)]
    return missing


@pytest.mark.parametrize("typo", ["askhuman_decision_total", "askhuman_pending_request"])
def test_a_misspelled_name_would_be_caught(typo: str) -> None:
    names = metric_names(f"sum by (route) (increase({typo}[1h])) > 0")
    assert names == {typo}
