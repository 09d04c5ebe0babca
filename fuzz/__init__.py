"""Coverage-guided fuzzing (atheris, libFuzzer) of every reader of outside bytes and tables.

`make fuzz` (or `python -m fuzz [--seconds N] [target ...]`) seeds each target's corpus from
generated telemetry and a crashed store, runs it for a while and prints what it found. The
property of every target: the input is either accepted or refused with the project's own
exception; nothing else is raised, nothing crashes or hangs, and what the encoder accepts
decodes back to itself. numba kernels run with bounds checks (NUMBA_BOUNDSCHECK=1), so an
index a corrupt input drives out of range is an IndexError here instead of a silent read.

Targets (one module each):

- ``decoder_bytes``: envelope bytes, and IPC payload bytes inside a valid envelope, alone or
  after a valid envelope opened the stream (deltas against its dictionaries);
- ``decoder_tables``: valid Arrow IPC with wrong contents (values, nulls, dropped columns,
  ``encoding`` marks, row counts) in a unary envelope;
- ``encoder_tables``: generated plain bundles with the same mutations, encoded sorted or not:
  refused with EncodingError or decoded equal (canonical OTLP); the same encoder and decoder
  then carry a clean batch;
- ``otlp``: OTLP protobuf and JSON requests, then encode, decode and compare;
- ``store_files``: one file of a crashed store (any WAL file, any segment, ack log, checkpoint,
  sidecar, floor, progress ledger, the ledger also with its CRC made right) replaced, then `quiver
  verify` / `inspect` / `replay` / `dump` and an open, read and drain of both subscribers and a
  committed_offset of each producer in the three recovery modes (each step also after an earlier
  one raised QuiverError, and the deliveries again after a flush put the WAL's replayed bundles in
  a segment). Wrong data fails the target too, not only a crash (readback.py): a bundle read from a
  template segment must be the one stored there (same slots, rows, fingerprints and ingestion time)
  unless the input edited that file and every checksum the reader checks for that bundle holds
  in it and a part the bundle is built from (manifest row and refs, its streams' fingerprints and
  slices) differs; a bundle replayed from the WAL must be one of the template's frames' unless an
  edited WAL file holds a new frame with a valid CRC. The crashed store (store_files.py; made
  once per output folder, about 136 KB; the old one was 1.1 MB, mostly a WAL tail of zeros) is an OTAP-layout store that was closed once (so it has an
  ack checkpoint) and reopened: subscribers "a" and "b" with acks, nacks, gaps, a done segment
  and "dropped" outcomes from a retention drop (max_age) of segment 0, a third subscriber
  unsubscribed, segments 1 and 2 uncompressed and 3 zstd, and three bundles left in a WAL of
  three files (``wal.rotation_size`` 16 KiB), the active one with a pre-extended zero tail.
  Producer progress (slot 63) of three producers is in it everywhere a committed offset is read
  from: ``segments/progress.ledger`` (segment 0's, kept before retention deleted it), segments 1
  and 3, and the WAL's last two bundles only (replay recovers them);
- ``wal_frames``: the same, with the frames of the three WAL files edited as one list (types,
  sequences, bitmaps, slot metadata, payload bytes, synced ranges, frames duplicated, dropped,
  swapped, also between the files, a slot moved to the progress slot) and their CRCs made right
  again, so recovery reads the wrong contents instead of stopping at a bad CRC;
- ``ack_frames``: the same for the ack log's records and the template's ack checkpoint's fields;
- ``segment_fields``: the same for the zstd segment's directory, manifest, metadata and footer
  fields and its stream slices, every checksum made right again.
"""
