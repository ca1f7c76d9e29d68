"""``python -m cli`` is the ``lakehouse`` command.

spark-submit only runs ``.py`` files, so this file is also the entry point of every
SparkApplication on Kubernetes (``local:///opt/lakehouse/cli/__main__.py run clicks``):
one code path for both runtimes.
"""

from cli.main import main

if __name__ == "__main__":
    main()
