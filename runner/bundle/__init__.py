"""Bundles: pack a campaign into one verifiable archive, verify it, replay trials from it.

A bundle is a deterministic ``.tar.gz`` (sorted names, fixed mtimes, uid/gid 0,
no links) holding::

    BUNDLE.json                      what is inside: every file's sha256 and size, input
                                     fingerprints, the ledger facts (host, rental, dates)
    campaign/campaign.json, study.toml, corpus_index.csv, schedule.csv, events.jsonl,
    campaign/raw.csv, verdicts.{csv,json}, summary.{md,json}, decision/report files if any
    campaign/trials/<id>/            spec.json, manifest.json, predictions.jsonl, status.json,
                                     trial.log, launcher.json
    catalog/<catalog>.csv            the dated plan catalog the study prices with
    images/images.lock               the image lock, when this checkout has one
    inputs/{corpus,tuning,model}/    only with --include-inputs

Modules, lowest first:

- :mod:`protocol.io.safe_extract`: reads an untrusted archive (limits, no links, no escapes).
- :mod:`runner.bundle.records`: ``BUNDLE.json`` and the verify and replay reports.
- :mod:`runner.bundle.verify`: :func:`~runner.bundle.verify.verify_bundle` checks every hash, that
  the archive holds exactly the listed files, and that the campaign is internally consistent
  (raw rows ↔ trial directories ↔ specs, manifests, statuses, predictions; schedule ↔ rows;
  events ↔ rows; the study's hash).
- :mod:`runner.bundle.pack`: :func:`~runner.bundle.pack.create_bundle` writes the archive and
  verifies it before keeping it.
- :mod:`runner.bundle.replay`: :func:`~runner.bundle.replay.replay_bundle` reruns trials with the
  same spec, inputs checked by hash, through the launcher the original used, and compares the
  predictions as the study's ``quality.replay`` declares.

Example::

    create_bundle(Path("results/quick"), Path("quick.tar.gz"))
    verify_bundle(Path("quick.tar.gz")).ok          # True
    replay_bundle(Path("quick.tar.gz"), trial_ids=["001-r1-batch_size-1"]).matches
"""
