"""The control record: validated as control, not as a tick; encoded, decoded, refused."""

import pytest

from lazystandby.formats.control import encode as control_payload


def test_control_records_are_validated_as_control_not_as_ticks():
    from lazystandby.core.errors import MalformedRecord
    from lazystandby.formats.control import validate_control

    validate_control(control_payload("price > 5"))
    for bad in [b"price > 5", b'{"predicate": "colour = 1"}', b'{"x": 1}', b"\xff"]:
        with pytest.raises(MalformedRecord):
            validate_control(bad)


def test_control_record_encode_decode_and_refusals():
    from lazystandby.core.errors import MalformedRecord
    from lazystandby.formats import control

    assert control.decode(control.encode("price < 7")) == "price < 7"
    for bad in (b"{}", b"not json", b'{"predicate": 5}', control.encode("price >>> 3")):
        with pytest.raises(MalformedRecord, match="control record refused"):
            control.decode(bad)
