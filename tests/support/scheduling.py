"""How ``make slow`` hands tests to its workers: one program's tests together (``tests/conftest.py``'s scheduler)."""

#: The modules whose tests read one ``minify run`` per program, cached per process (the parameter
#: names the program): all of a program's tests must run on one worker, or each worker runs it again.
ONE_RUN_PER_PROGRAM = ("minifier/test_real_bugs.py", "minifier/test_torch_scenarios.py")


def program_scope(nodeid: str) -> str:
    """The unit ``make slow`` hands to one worker: a program's tests in :data:`ONE_RUN_PER_PROGRAM`
    (``tests/minifier/test_real_bugs.py[<program>]``), else the test itself."""
    path, _, test = nodeid.partition("::")
    if path.removeprefix("tests/") in ONE_RUN_PER_PROGRAM and test.endswith("]"):
        return f"{path}[{test.split('[', 1)[1]}"
    return nodeid
