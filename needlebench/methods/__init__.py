"""Methods that change how a model runs, as axes of a run (KV-cache compression)."""
