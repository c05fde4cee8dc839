"""What the advisor returns: the trace (an OPA-style decision log), the audit, the recommendation,
and their text. No decision is made here."""
