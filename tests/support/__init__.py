"""What the tests share, imported as ``support.<module>`` (tests/ is on ``sys.path``):

- ``paths``: the repository, its tests and examples, and the test programs' own modules;
- ``programs``: a small model compiled with a planted backend, and one ``minify run`` in-process;
- ``running``: a repro run as its reader runs it (torch alone, elsewhere, an empty cache);
- ``scheduling``: which tests ``make slow`` hands to one worker together;
- ``fuzzing``: the property-based fuzzer;
- ``records``: the round trip of a report through its typed record;
- ``browser``: headless Chromium for the page tests.

``user_modules/`` is not part of the package: it holds what a test program imports as a
user's program imports its own modules (``import planted``: small purpose-built failing
backends, registered by name; ``fuzz_backends``, the fuzzer's; ``replay_programs``, the frames
replay's tests record). It is a directory on ``sys.path``, so that pt2kit copies each one beside
a repro as it would a user's single-file module.
"""
