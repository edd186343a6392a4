"""KiviDB agent memory: the domain core shared by every function through the Lambda layer.

The domain modules never read ``os.environ`` and never know HTTP: ``runtime`` reads the
function's settings when an invocation starts, and ``api`` is the one place that turns domain
errors into HTTP answers.
"""
