"""tests/corpus holds third-party source files that tests/test_corpus.py lints.

They are data, never run: keep pytest from collecting the ``*_test.py`` files among them.
"""
collect_ignore_glob = ["*.py", "*.ipynb"]
