"""Analysis over stored data: sides, pairing, statistics, comparison, noise, census, timeline."""
