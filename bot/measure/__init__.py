"""Measurement: L0 accuracy, latency backends, noise statistics, sandbox, environment.

The loop talks only to `Evaluator` (bot/measure/evaluator.py) and the records in types.py.
"""
