"""What to try next: parent selection, the tuning proposer (Optuna), per-shape evidence."""
