"""A continual-learning method library, written once and used by the nav4 and wmf suites through their step hooks
(`core`): `nav4` and `wmf` bind each algorithm to that suite's method interface (what the model is, what a
batch's loss is, where replayed samples come from). Light to import: torch is imported inside the algorithms."""
