"""Moved to :mod:`lmms_eval_plugins.tiny_qwen` (``demo`` and the ``tiny-qwen`` command build the model with
it, and shipped code may not import this test kit); this name stays for the tests and benchmarks that
import it, and ``python -m lmms_eval_plugins.testing.tiny_qwen`` still builds the model."""

from __future__ import annotations

from lmms_eval_plugins.tiny_qwen import (  # noqa: F401
    BUILDER_VERSION,
    LMMS_EVAL_MODEL_ARGS,
    MARKER_NAME,
    build_tiny_qwen2_5_vl,
    lmms_eval_model_args,
    main,
)

if __name__ == "__main__":
    raise SystemExit(main())
