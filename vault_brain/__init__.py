"""vault-brain: a second brain for LLMs that lives in a folder of Markdown notes."""

__version__ = "0.1.0"
