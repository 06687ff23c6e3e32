"""A problem: its spec (problem.yaml), constraints, template rendering and per-shape composition."""
