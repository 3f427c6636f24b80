"""When a condition that goes on is worth a log line."""



def test_a_condition_that_recurs_is_said_once_then_once_every_interval_with_what_was_not_said():
    from lazystandby.core.reminder import Reminder

    now = [0.0]
    r = Reminder(lambda: now[0], every=30.0)
    assert not r.recently() and r.due()
    now[0] = 29.9
    assert r.recently() and not r.due() and not r.due()
    now[0] = 30.0
    assert not r.recently() and r.due() and r.take_suppressed() == 2 and r.take_suppressed() == 0
    now[0] = 45.0
    r.say_now()  # said for another reason (a link just went down): the next reminder is 30 s from here
    now[0] = 74.9
    assert not r.due()
    now[0] = 75.0
    assert r.due() and r.take_suppressed() == 1
