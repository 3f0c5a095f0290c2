"""The model-level loop (MindIE-SD method): the bot's second kind of target.

A model target is `<ops_root>/<project>/<model>/model.yaml` (docs/model.md). Modules, one job each:

- `spec`     model.yaml: load and validate (clear errors, exit 2)
- `commands` run the benchmark / analysis / quality commands and parse their JSON
- `rank`     which feature setting to try next: `advise` over the analysis, then the priority rule
- `state`    pure fold of the run's results.jsonl into its state
- `stops`    stop reasons with their evidence
- `records`  model opt_log.md and completion report
- `loop`     the state machine: baseline, iterate, decide, stop, deliver, propose, resume
"""
