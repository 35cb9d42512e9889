"""The built-in launcher kinds, one package each (``process``, ``docker``, ``slurm``), found by name.

Each package's ``__init__.py`` defines ``KIND`` (:class:`runner.launch.launcher.LauncherKind`); the discovery
(:func:`runner.launch.launcher.launcher_kinds`) lists this folder and the folders of ``ISOCOST_LAUNCHERS_PATH``.

Example::

    from runner.launch.kinds.process import KIND
    KIND.name   # "process"
"""
