"""Looking into a database: sizes and statistics, every event with what forgot it, and the
doctor's checks and repairs. The command line prints what these return; any program can
call them, on SQLite or PostgreSQL alike."""

from .doctor import Problem, Report, check, repair
from .history import HistoryRow, history
from .summary import ConversationSummary, Stats, stats, summaries

__all__ = [
    "ConversationSummary", "HistoryRow", "Problem", "Report", "Stats", "check", "history", "repair", "stats",
    "summaries",
]
