"""``python -m gr_core.gnn_rag``: see :func:`gr_core.studies.gnn_rag.main`."""
from ..studies.gnn_rag import main

raise SystemExit(main())
