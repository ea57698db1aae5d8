"""``python -m gr_core.g_retriever``: one training run (a RunConfig file, or a preset's notebook-03 run); also under
``torchrun``. See :mod:`gr_core.g_retriever.experiments`."""
from .experiments import main

raise SystemExit(main())
