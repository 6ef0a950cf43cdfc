"""Optional compiled parts (C, built by `pip install`): each gives the same answers as the
Python it speeds up, which stays beside it as the fallback and the tests' reference."""
