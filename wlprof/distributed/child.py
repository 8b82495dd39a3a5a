"""A rank started by `distributed.launch`: `python -m wlprof.distributed.child STUDY.json`."""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    from wlprof.capture import CaptureConfig
    from wlprof.cli.distributed import execute_rank
    from wlprof.study import Study

    spec = json.loads(open(argv[0]).read())
    d = spec["study"]
    study = Study(workload=d["workload"], params=d.get("params") or {}, device=d.get("device"), dtype=d.get("dtype"),
                  capture=CaptureConfig(**(d.get("capture") or {})), name=d.get("name"),
                  description=d.get("description"), source=d.get("source"))
    return execute_rank(study, spec["traces"], spec.get("quiet", False), spec.get("command"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
