"""``python -m gr_core.gnn_rag``: see :func:`gr_core.gnn_rag.studies.main`."""
from .studies import main

raise SystemExit(main())
