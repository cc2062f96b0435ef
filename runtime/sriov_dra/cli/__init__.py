"""Admin commands: ``sriov-dra inspect``, ``preflight``, ``orphans``, ``lab``."""
