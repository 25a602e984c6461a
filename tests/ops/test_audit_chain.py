"""The audit hash chain (sealing, retention gaps, tampering) and signed receipts."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from pathlib import Path

import pytest
from sqlalchemy import delete, select, update

from bot.engine import audit_chain, receipts, store
from bot.engine.housekeeping import apply_retention
from bot.engine.ports import Identity
from bot.settings import RetentionSettings
from storage import AuditChainGap, AuditLog, Database
from tests.api.conftest import Door
from tests.ops.test_admin_cli import as_json, cli, run_row, start, wait_for
from tests.slack.conftest import MALLORY

T0 = dt.datetime(2026, 1, 1, 12, 0)
KEY = "receipt-test-key"


def write(db: Database, at: dt.datetime, event: str, **kw: object) -> None:
    with db.transaction() as session:
        store.audit(session, at, event, **kw)  # type: ignore[arg-type]


def verdict(db: Database) -> audit_chain.Verdict:
    with db.transaction() as session:
        audit_chain.seal(session, T0)
    with db.read() as session:
        return audit_chain.verify(session)


@pytest.fixture
def database(db_url: str) -> Database:
    db = Database(db_url)
    db.upgrade()
    return db


def test_sealed_chain_survives_counters_redaction_and_pruning(database: Database) -> None:
    mallory = Identity("slack", MALLORY, None)
    write(database, T0, "old_a")
    write(database, T0, "refused", outcome="refused", actor=mallory)  # aggregated
    write(database, T0, "old_b", details={"values": {"x": "secret"}})
    write(database, T0 + dt.timedelta(days=8), "new_c")
    assert verdict(database).ok and verdict(database).checked == 4
    # A repeat refusal months later only bumps the counter: still intact, and it keeps
    # the aggregated row alive, so pruning leaves a hole in the middle of the chain.
    write(database, T0 + dt.timedelta(days=9), "refused", outcome="refused", actor=mallory)
    with database.transaction() as session:
        row = session.scalars(select(AuditLog).where(AuditLog.event == "old_b")).one()
        row.details = audit_chain.redacted_details(row.details)
    assert verdict(database).ok
    write(database, T0 + dt.timedelta(days=9), "new_d")
    counts = apply_retention(database, T0 + dt.timedelta(days=10),
                             RetentionSettings.model_validate({"audit": "3d"}))
    assert counts["audit_deleted"] == 2  # old_a and old_b; the refusal row stays
    result = verdict(database)
    assert result.ok and result.checked == 3 and result.gaps == 2, result
    # A second prune that removes the refusal row merges the jumps.
    apply_retention(database, T0 + dt.timedelta(days=30),
                    RetentionSettings.model_validate({"audit": "15d"}))
    with database.transaction() as session:
        assert [r.event for r in session.scalars(select(AuditLog))] == []
        assert len(session.scalars(select(AuditChainGap)).all()) == 1
    write(database, T0 + dt.timedelta(days=31), "after_everything")
    assert verdict(database).ok


def test_edits_and_deletions_name_the_first_broken_row(database: Database) -> None:
    for i in range(5):
        write(database, T0 + dt.timedelta(minutes=i), f"e{i}", reason=f"r{i}")
    assert verdict(database).ok
    with database.transaction() as session:
        ids = list(session.scalars(select(AuditLog.id).order_by(AuditLog.id)))
        session.execute(update(AuditLog).where(AuditLog.id == ids[2]).values(reason="edited"))
    broken = verdict(database)
    assert not broken.ok and broken.broken_id == ids[2] and "changed" in str(broken.problem)
    with database.transaction() as session:
        session.execute(update(AuditLog).where(AuditLog.id == ids[2]).values(reason="r2"))
    assert verdict(database).ok
    with database.transaction() as session:
        session.execute(delete(AuditLog).where(AuditLog.id == ids[1]))
    deleted = verdict(database)
    assert not deleted.ok and deleted.broken_id == ids[2]
    with database.transaction() as session:
        session.execute(delete(AuditLog).where(AuditLog.id == ids[4]))
    assert not verdict(database).ok


async def test_served_audit_verifies_and_receipts_sign_the_decision(
    ops: Door, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(receipts.KEY_ENV, KEY)
    ref, ts = await start(ops)
    await ops.slack.interact(ops.slack.click_payload(ts, "Approve", MALLORY))
    await ops.approve_in_slack(ts)
    await wait_for(lambda: run_row(ops).status == "succeeded", "the run to finish")

    ok = as_json(await cli("audit", "verify", "--json", "--config", str(config)))
    assert ok["ok"] and ok["checked"] >= 4 and ok["unsealed"] == 0
    # More refusals after sealing only bump the counter; the chain still verifies.
    await ops.slack.interact(ops.slack.click_payload(ts, "Approve", MALLORY))
    assert as_json(await cli("audit", "verify", "--json", "--config", str(config)))["ok"]

    with ops.database.transaction() as session:
        victim = session.scalars(select(AuditLog).where(AuditLog.event == "decided")
                                 .order_by(AuditLog.id)).first() or session.scalars(
            select(AuditLog).order_by(AuditLog.id.desc())).first()
        assert victim is not None
        victim_id = victim.id
        victim.actor_user = "U0SOMEONE_ELSE"
    broken = await cli("audit", "verify", "--config", str(config))
    assert broken.exit_code == 1 and f"BROKEN at row {victim_id}" in broken.stdout

    shown = as_json(await cli("requests", "show", ref, "--json", "--config", str(config)))
    receipt = shown["receipt"]
    assert receipt and receipt.startswith("ahr1.")
    good = as_json(await cli("receipt", "verify", receipt, "--check-database", "--json",
                             "--config", str(config)))
    assert good["valid"] and good["matches_database"] and good["ref"] == ref
    assert good["decision"] == "submitted:approve" and good["deciders"] == ["slack:U0ALICE"]

    head, body, mac = receipt.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged_body = base64.urlsafe_b64encode(json.dumps(
        {**payload, "d": "submitted:reject"}).encode()).rstrip(b"=").decode()
    for bad in (f"{head}.{forged_body}.{mac}", receipt[:-2] + "AA", "ahr1.nope", "hello"):
        refused = await cli("receipt", "verify", bad)
        assert refused.exit_code == 1 and "INVALID" in refused.stdout, bad
    monkeypatch.setenv(receipts.KEY_ENV, "another-key")
    assert (await cli("receipt", "verify", receipt)).exit_code == 1
    monkeypatch.delenv(receipts.KEY_ENV)
    nokey = await cli("receipt", "verify", receipt)
    assert nokey.exit_code == 2 and receipts.KEY_ENV in nokey.output
    await asyncio.sleep(0)


def test_concurrent_sealers_and_writers_never_fork_the_chain(database: Database) -> None:
    """Replicas seal at the same time as others write: one chain, every row once."""
    import threading

    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(15):
                write(database, T0, f"w{n}-{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def sealer() -> None:
        try:
            for _ in range(15):
                with database.transaction() as session:
                    audit_chain.seal(session, T0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    threads += [threading.Thread(target=sealer) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    result = verdict(database)
    assert result.ok and result.checked == 45 and result.unsealed == 0, result
    with database.read() as session:
        seqs = sorted(s for s in session.scalars(select(AuditLog.chain_seq)) if s)
    assert seqs == list(range(1, 46))
