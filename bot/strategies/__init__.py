"""Strategy catalog, source transforms (libcst), planner, evidence and the external proposer."""
