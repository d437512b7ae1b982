"""The peers Baton is measured against, each run as a child process in .venv-bench."""
