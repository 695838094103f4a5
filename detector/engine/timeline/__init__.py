"""The postmortem view of logged plans: segments and flips per query (`build.py`), their
likely causes, and the top queries of a window."""
