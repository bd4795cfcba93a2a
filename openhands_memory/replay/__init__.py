"""Replay: a recorded history run again under other strategies, call by call.

``Conversation.replay`` is the entry; ``run.py`` the loop, ``calls.py`` where the recorded
run called its model, ``meter.py`` what each call would have sent, ``lost.py`` the
lost-information proxy, ``report.py`` the results, ``chart.py`` their picture.
"""
