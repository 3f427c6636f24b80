"""The record formats, one home each: the tick schema (ticks.py), the predicate language over it
(predicate.py) and the control record that switches the predicate in-band (control.py)."""
