"""What every benchmark script shares: quiet progress bars by default, and the measurement helpers of
:mod:`gr_core.measure` (tested there)."""
import os

os.environ.setdefault("GR_PROGRESS", "off")

from gr_core.measure import (gemm_peak_gflops, machine, mean_loss, result_path, slug, summarize,  # noqa: E402, F401
                             synchronize, timed, train_step_seconds, write_result)
from gr_core.runs import package_versions  # noqa: E402, F401
