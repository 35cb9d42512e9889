"""The Slurm launcher: every trial attempt one ``sbatch --parsable --no-requeue`` job on a pinned node.

- :mod:`~runner.launch.slurm.options` the cluster options (partition, account, QOS, GPUs, time,
  extra sbatch arguments, runtime, shared directory, login node) and what they refuse;
- :mod:`~runner.launch.slurm.commands` sbatch, scontrol, scancel and sinfo, here or over ssh;
- :mod:`~runner.launch.slurm.jobs` a job's state as Slurm reports it, and what it means for a trial;
- :mod:`~runner.launch.slurm.script` the batch script of each runtime (process, docker, pyxis);
- :mod:`~runner.launch.slurm.preflight` the checks and the pre-flight job before any trial;
- :mod:`~runner.launch.slurm.launcher` :class:`SlurmLauncher`, the launcher's whole life.
"""
