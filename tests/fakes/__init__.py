"""Fakes of outside services (LLM endpoints) that tests run for real on loopback."""
