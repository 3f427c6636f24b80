"""Every exception the runtime defines lives in core/errors.py, under LazyStandbyException."""

import importlib
import inspect
import pkgutil

import lazystandby
from lazystandby.core import errors

# The harness (tests, bench, chaos) is no part of the runtime; v1 is generated; _zrun is a C library
# loaded with ctypes, no Python module.
OUTSIDE = ("lazystandby.harness", "lazystandby.v1", "lazystandby.native._zrun")


def runtime_modules():
    for info in pkgutil.walk_packages(lazystandby.__path__, "lazystandby."):
        if not info.name.startswith(OUTSIDE):
            yield importlib.import_module(info.name)


def test_every_exception_of_the_runtime_is_defined_in_errors_under_one_root():
    found = {}
    for mod in runtime_modules():
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("lazystandby"):
                found[f"{obj.__module__}.{name}"] = obj
    elsewhere = sorted(k for k, c in found.items() if c.__module__ != "lazystandby.core.errors")
    assert elsewhere == []
    outside = sorted(k for k, c in found.items() if not issubclass(c, errors.LazyStandbyException))
    assert outside == []
    assert len(found) >= 28  # the whole hierarchy was seen, not an empty walk


def test_protocol_errors_carry_a_status_and_a_counter_and_user_errors_stay_value_errors():
    for c in vars(errors).values():
        if inspect.isclass(c) and issubclass(c, errors.LazyStandbyError):
            assert isinstance(c.status, errors.Status) and c.counter, c
    for c in (errors.SettingError, errors.PredicateError, errors.ResultsFormatError):
        assert issubclass(c, ValueError)
    assert issubclass(errors.SourceGap, RuntimeError)
