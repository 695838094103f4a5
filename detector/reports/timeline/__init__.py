"""The postmortem view: timelines and top queries in the terminal and as JSON."""
