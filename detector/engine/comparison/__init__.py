"""A comparison of two sides: pairing, statistics, verdicts, conditions and attributions;
`compare.py` is the entry, `store_compare.py` the front door for a store."""
