"""KiviDB agent memory: the domain core shared by every function through the Lambda layer.

The core never reads ``os.environ`` and never knows HTTP; handlers pass settings in and the
``api`` module is the one place that turns domain errors into HTTP answers.
"""
