"""The lake writer: keyed Iceberg tables kept merge-on-read through PyIceberg, readable by every engine.

Its public surface, which the CDC apply (``pipeline.cdc``) drives:

- ``catalog_tables``: declare a table (created idempotently with its properties), read the
  position a writer recorded in a snapshot summary, retry a commit another writer beat;
- ``row_delta``: one commit of new data files and the position deletes of the rows they replace,
  with the writer's position in the same snapshot (exactly once);
- ``key_index`` and ``live_rows``: where each key's live row is (file, position);
- ``fold``: a bucket's full size tiers of small files and its much-deleted files rewritten into files of the
  target size, its delete files replaced by one per kept data file, in one commit;
- ``expiry``: the writer's own old snapshots expired after a fold.

PyIceberg's private classes are imported in ``pyiceberg_internals`` alone; ``row_delta`` extends the
fast-append producer's private hooks (its manifests and summary) to add delete manifests.
"""
