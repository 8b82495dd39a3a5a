"""`python -m wlprof ...` (and `torchrun ... -m wlprof run ...`): the `wlprof` command."""

from wlprof.cli.main import main

main()
