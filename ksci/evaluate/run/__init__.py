"""Running the harness child, on the parent's side: its process and GPU, its report pipe, its hard timeout."""
