"""Files strangers wrote, read and written safely: every byte isocost reads from or writes to a user's disk.

``safe_read`` (a named file, bounded, no traceback), ``safe_write`` (no symbolic link followed), ``safe_extract``
(archives), ``jsonio`` and ``csvio`` (the one JSON and CSV rule each), ``names`` and ``paths`` (names and paths from
files), ``fingerprint`` (sha256 of files and trees), ``tomledit`` (a careful edit of a study), ``gc_pause``.
"""
