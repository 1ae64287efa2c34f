"""ward's Python kernel (started by runners/python/kernel.py): core.py runs
cells, streams.py and wire.py carry the output; errors.py, lint.py and
call.py load on first use."""
