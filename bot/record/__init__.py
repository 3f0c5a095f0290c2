"""Records: opt_log.md, results.jsonl, completion report, charts."""
