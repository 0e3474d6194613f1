"""One-file additions through the registries, as docs/extending.md shows them: a loss, an architecture and a
decoding strategy, each exercised by tests/extending/test_extending.py."""
