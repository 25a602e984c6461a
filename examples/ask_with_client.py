"""Ask a person in Slack or Feishu from a script, with the ``askhuman-client`` package
(``pip install -e clients/python``; see docs/client.md).

    ASKHUMAN_API_KEY=ahk_… python examples/ask_with_client.py
"""

from __future__ import annotations

import os

from askhuman_client import Client


def main() -> None:
    route = os.environ.get("ASKHUMAN_ROUTE", "ops")
    with Client(os.environ.get("ASKHUMAN_URL", "http://127.0.0.1:3000"),
                os.environ["ASKHUMAN_API_KEY"]) as client:
        result = client.ask(route, {"question": "Deploy v1.2.3 to production?", "actions": [
            {"id": "approve", "label": "Approve", "style": "primary"},
            {"id": "reject", "label": "Reject", "style": "destructive"}]},
            idempotency_key="deploy-v1.2.3")
        print(result.status, result.action.id if result.action else None, result.values)
        refund = client.approve(route, "refund", {"order": "A-17", "amount": 250},
                                reason="customer asked", editable=["amount"])
        if refund.decision and refund.decision.approved:
            print("refund approved with", refund.updated_input)
        else:
            print("refund refused:", refund.decision.reason if refund.decision else "?")


if __name__ == "__main__":
    main()
