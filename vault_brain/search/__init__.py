"""Search as a pipeline: retrieval arms → fusion → hydration (snippets, summaries).

Each arm is one file (`fulltext.py`, `semantic.py`); fusions are a registry keyed by the
config name (`fusion.py`); `pipeline.py` runs them on one snapshot of the index."""
