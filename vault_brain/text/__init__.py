"""Pure functions over text, shared by every layer: the full-text analysis (languages,
stemming, stopwords, CJK and Thai n-grams) and the spotting of credentials. A leaf: it
imports nothing of vault-brain's but other leaves."""
