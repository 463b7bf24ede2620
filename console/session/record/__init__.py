"""Recording every poll to disk and reading it back: what replay and the live pause move
over. No Textual here: the screens get ``ConsoleState`` values from a ``Tape``."""
