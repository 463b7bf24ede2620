"""The field's benchmark: speed and speculative acceptance through the users' path.

``prompts`` holds what is sent, ``measure`` sends it and reads the slot's counters around
it, ``record`` keeps, compares and prints the result. No Textual here: the CLI
(``pod-console bench``), the console's key and the tests run the same code.
"""
