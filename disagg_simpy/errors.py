"""The one error type users see: bad input, reported as one line, exit code 2."""


class InputError(Exception):
    """Bad user input (scenario, trace, flag).

    The message is one line that names the file, the key or row, the bad value and what was
    expected. The CLI prints it on stderr and exits with code 2.
    """
