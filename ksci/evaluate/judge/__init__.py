"""Judging what the harness child reported: the message schema, the timing rules, the verdict."""
