"""One tuning run of a target (an op or a model): request, records, replay, stop rules, the state
machine, delivery and the proposal. docs/architecture.md maps the modules."""
