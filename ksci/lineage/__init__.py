"""The lineage: every candidate of every run, in Parquet parts under a store."""
