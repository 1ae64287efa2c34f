"""Runs the SDK's unittest suite and prints TAP, one line per test:
`ok N - name`, `not ok N - name` (with the traceback as `#` lines), or
`ok N # SKIP name (reason)`. No plan line: the caller prints it.

    python tap.py [--offset N] [-k PATTERN]
"""
import argparse
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class TapResult(unittest.TestResult):
    def __init__(self, offset):
        super().__init__()
        self.n = offset

    def _line(self, text, detail=None):
        self.n += 1
        print(text.replace("{n}", str(self.n)), flush=True)
        if detail:
            for line in detail.rstrip().splitlines()[-40:]:
                print("#   " + line, flush=True)

    @staticmethod
    def _name(test):
        doc = test.shortDescription()
        name = f"{test.__class__.__name__}.{test._testMethodName}"
        return f"{name}: {doc}" if doc else name

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line(f"ok {{n}} - {self._name(test)}")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line(f"not ok {{n}} - {self._name(test)}", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._line(f"not ok {{n}} - {self._name(test)}", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line(f"ok {{n}} # SKIP {self._name(test)} ({reason})")

    def addExpectedFailure(self, test, err):
        self._line(f"not ok {{n}} - {self._name(test)} # TODO expected failure")

    def addUnexpectedSuccess(self, test):
        self._line(f"not ok {{n}} - {self._name(test)} (unexpected success)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("-k", dest="pattern")
    a = ap.parse_args()
    loader = unittest.TestLoader()
    if a.pattern:
        loader.testNamePatterns = [f"*{a.pattern}*"]
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    result = TapResult(a.offset)
    suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
