"""Where requests come in: the resolver every handler uses, error mapping, authorization and
the per-container wiring of services."""
