"""Signed webhooks: a store's endpoints are told of its events (``models``), which wait in an
outbox in the control database (``outbox``) until the delivery side sends them, signed as the
Standard Webhooks specification has it (``signing``, ``delivery``)."""
