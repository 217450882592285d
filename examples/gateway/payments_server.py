"""A payments server over stdio: look up a balance and an invoice; refund, transfer and charge money."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import record  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp_types import ToolAnnotations  # noqa: E402

server = MCPServer("payments")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get_balance(account: str) -> str:
    """Show the current balance of a customer account."""
    record("payments", "get_balance", {"account": account})
    return f"{account}: 120.00 EUR"


@server.tool()
def refund_payment(payment_id: str, amount: float) -> str:
    """Refund a customer's card payment, in full or in part."""
    record("payments", "refund_payment", {"payment_id": payment_id})
    return f"refunded {amount} on {payment_id}"


@server.tool()
def transfer_money(from_account: str, to_account: str, amount: float) -> str:
    """Transfer money between two bank accounts."""
    record("payments", "transfer_money", {})
    return "transferred"


@server.tool()
def charge_card(card_token: str, amount: float) -> str:
    """Charge a customer's credit card."""
    record("payments", "charge_card", {})
    return "charged"


if __name__ == "__main__":
    server.run()
