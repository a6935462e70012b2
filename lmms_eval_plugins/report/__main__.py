"""``python -m lmms_eval_plugins.report``: the same as ``lmms-eval-plugins report``."""

from lmms_eval_plugins.report.command import main

raise SystemExit(main())
