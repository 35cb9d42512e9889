"""Hardware tables: driver/backend compatibility (``compat``) and a variant's memory estimate (``memory``)."""
