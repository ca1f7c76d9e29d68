"""``python -m lakehouse`` is the ``lakehouse`` CLI.

spark-submit only runs ``.py`` files, so this file is also the entry point of every
SparkApplication on Kubernetes (``local:///opt/lakehouse/lakehouse/__main__.py run clicks``):
one code path for both runtimes.
"""

from lakehouse.cli.main import main

if __name__ == "__main__":
    main()
