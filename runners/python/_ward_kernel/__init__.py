"""The parts of ward's Python kernel (runners/python/kernel.py) that it loads
from its own directory: streams at start, the rest on first use."""
