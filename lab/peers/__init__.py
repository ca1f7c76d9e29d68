"""Other systems doing the pipeline's job, run beside it by `lakehouse bench peers` (docs/peers.md).

Each peer reads the same click topic, enriches with the same products and members (Spark's
standard path from the lake's dimension tables, seed 001's Flink job from the shop database
through lookups, as the seed does) and writes a table of the click table's layout
(``pipeline.tables.ensure_clicks_tables``), so the benchmark measures all of them the same way.
The CDC peers (`lakehouse bench cdc --apply`, `bench cdc-peers`) apply the same change stream to
the dimension tables: Spark's ``MERGE INTO`` (``cdc_merge``), seed 004's Flink upsert sink
(``cdc_flink``, ``flink_cdc_job``) and the apply as one Python process (``cdc_python``).
Peers live in the harness: the image never runs them.
"""
