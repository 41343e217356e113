def combinations(target, size, exclude):
    pass
