"""A continual-learning method library, written once and used by the nav4 and wmf suites through their step hooks
(`core`): each suite's `library` module binds an algorithm to its method interface (what the model is, what a
batch's loss is, where replayed samples come from). Light to import: torch is imported inside the algorithms."""
