"""Checkpoint files of the real models: generic, torch-free checks every model's loader shares."""
