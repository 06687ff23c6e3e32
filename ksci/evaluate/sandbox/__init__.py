"""Confinement of foreign code: the namespace sandbox of a compile and of the harness child, its capability and
syscall limits, and the bounds on what they may write."""
