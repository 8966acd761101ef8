"""The RoadFlex sales-agent demo: a deterministic dataset, its seeders and ``mkg demo``.

Importing the package loads nothing else: ``dataset`` is standard library only, so the data can be
previewed without a database or MKG installed.
"""
