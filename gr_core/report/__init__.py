"""The results report (notebook 08): :mod:`~gr_core.report.results` (the tables), :mod:`~gr_core.report.claims` (a
verdict per paper claim), :mod:`~gr_core.report.summary` (``RESULTS.md``). It reads what the methods and studies
wrote; only the studies that tabulate runs import it back.
"""
