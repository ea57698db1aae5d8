"""The results report (notebook 08): :mod:`~gr_core.report.results` (the paper's tables from run directories),
:mod:`~gr_core.report.claims` (every paper claim with its paired test and verdict), :mod:`~gr_core.report.summary`
(``outputs/<preset>/RESULTS.md``). The report reads what the methods and studies wrote; nothing imports it back
except the studies that tabulate runs.
"""
