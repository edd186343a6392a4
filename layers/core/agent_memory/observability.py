"""Logs, metrics and traces, made in one place (Powertools ``Logger``, ``Metrics``, ``Tracer``).

Handlers decorate with these; the core opens subsegments with ``subsegment``.
"""

from __future__ import annotations

import warnings

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()
# Most routes publish no metric of their own; Powertools would warn on every such invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish")
