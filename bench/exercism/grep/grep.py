def grep(pattern, flags, files):
    pass
