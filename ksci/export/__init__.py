"""`ksci export`: a run's kernel as an installable Python package with a torch.library custom op (docs/export.md)."""
