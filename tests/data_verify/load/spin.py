"""Computes until the time-out: on a machine that starves it, the verdict says the machine was too busy."""
total = 0
while True:
    total += 1
