def value(colors):
    pass
