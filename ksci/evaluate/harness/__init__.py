"""Code that runs inside the candidate's child process (imports torch). One harness for every problem."""
