"""JSON for the protocol lines, straight from the C accelerator `_json`.

`import json` costs about 5 ms (it compiles regular expressions, which
imports re and enum): a fifth of the kernel's start. This module uses the
same C encoder and scanner as the json module, with the semantics of
json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
and json.loads(), and falls back to the json module where _json is missing.
It must accept and produce exactly what the json module would.
"""

try:
    import _json
except ImportError:                  # not CPython's usual build: take the slow road
    _json = None

WHITESPACE = " \t\n\r"


class _Context:
    """What _json.make_scanner reads from a json.JSONDecoder."""
    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int

    @staticmethod
    def parse_constant(name):
        raise ValueError("%s is not valid JSON" % name)


def _default(obj):
    raise TypeError("Object of type %s is not JSON serializable" % type(obj).__name__)


if _json is not None:
    _scan = _json.make_scanner(_Context)

    def dumps(obj):
        # A fresh markers dict each time: the encoder leaves it dirty after an error.
        encode = _json.make_encoder({}, _default, _json.encode_basestring, None,
                                    ":", ",", False, False, False)
        return "".join(encode(obj, 0))

    def loads(text):
        if isinstance(text, (bytes, bytearray)):
            text = text.decode("utf-8")
        start = len(text) - len(text.lstrip(WHITESPACE))
        try:
            try:
                obj, end = _scan(text, start)
            except SystemError:
                # _json raises its syntax errors as json.decoder.JSONDecodeError,
                # and only once that module is loaded: load it, and scan again.
                __import__("json.decoder")
                obj, end = _scan(text, start)
        except StopIteration as e:
            raise ValueError("Expecting value: line 1 column %d (char %d)"
                             % (e.value + 1, e.value)) from None
        if text[end:].strip(WHITESPACE):
            raise ValueError("Extra data: line 1 column %d (char %d)" % (end + 1, end))
        return obj
else:
    import json

    def dumps(obj):
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def loads(text):
        return json.loads(text, parse_constant=_Context.parse_constant)
