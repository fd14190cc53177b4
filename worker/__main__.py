"""`python -m worker [--host H] [--port P]`: the demo worker without the `tutor` command's imports."""

from worker.cli import worker_command

if __name__ == "__main__":
    import typer

    typer.run(worker_command)
